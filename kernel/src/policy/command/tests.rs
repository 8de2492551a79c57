//! Command facts: shell syntax, wrappers, and the multiplexers' allow-lists (issue 18 item 7),
//! with generated spellings of every documented option that is not on a list.

use super::scan::{Syntax, Takes, entries};
use super::tools::{
    CARGO_SUBS, FIND_DOC, FIND_LEADING, GIT_SUBS, MAKE, NPM, PYTEST, RSYNC, SCP, SED, SSH, TAR,
    UNZIP, ZIP,
};
use super::*;

fn facts(line: &str) -> CommandFacts {
    analyse(&split(line)).unwrap()
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// Unvetted or a wrapper: the command cannot run unless a person approves it (or never).
fn held(words: &[String]) -> bool {
    let f = analyse(words).unwrap();
    f.unvetted || f.wrapper
}

#[test]
fn plain_commands_are_neither_shell_nor_wrapper_nor_unvetted() {
    for line in [
        "cargo test",
        "cargo test -p craik",
        "pytest tests/unit",
        "git diff --check",
        "npm test",
    ] {
        let f = facts(line);
        assert!(!f.shell && !f.wrapper && !f.unvetted, "{line}: {f:?}");
        assert_eq!(f.unvetted_because, None, "{line}");
    }
}

#[test]
fn shell_syntax_is_flagged() {
    for line in [
        "cargo test; rm -rf /",
        "cargo test && curl x",
        "cargo test || true",
        "cargo test | sh",
        "cargo test & disown",
        "echo $(id)",
        "echo `id`",
        "cat <(id)",
        "cargo test > /etc/passwd",
        "cargo test\nrm -rf /",
        "cargo test\rrm",
        "LD_PRELOAD=/tmp/x.so cargo test",
        "PATH=/tmp cargo",
        "echo ~root",
        "ls *",
        "echo 'quoted'",
        "echo \"x\"",
        "a  b",
    ] {
        let argv = if line.contains('\n') || line.contains('\r') {
            vec![line.to_owned()]
        } else {
            split(line)
        };
        assert!(analyse(&argv).unwrap().shell, "{line:?}");
    }
}

#[test]
fn wrappers_interpreters_pagers_and_editors_are_wrappers() {
    for line in [
        "env cargo test",
        "timeout 5 cargo test",
        "nice cargo test",
        "sudo cargo test",
        "xargs rm",
        "/usr/bin/env cargo",
        "sh -c id",
        "bash -c id",
        "python3 -c print",
        "python3.12 -c x",
        "perl -e x",
        "node -e x",
        "node -p x",
        "php -r x",
        "pwsh -Command x",
        "ruby -e x",
        "./../bin/cargo test",
        "npx something",
        "pnpx something",
        "bunx something",
        "awk -e x",
        "sed -i s/a/b/ f",
        "less README.md",
        "more README.md",
        "most README.md",
        "pg README.md",
        "man ls",
        "vi x",
        "vim x",
        "vim.basic x",
        "nvim x",
        "view x",
        "ex x",
        "emacs x",
        "nano x",
        "ed x",
    ] {
        let f = facts(line);
        assert!(f.wrapper, "{line}: {f:?}");
    }
}

/// Issue 11 item 3: escape hatches by parsing, not spelling — now caught because they are not
/// on an allow-list (issue 18 item 7), however the tool would spell them.
#[test]
fn issue_11_escape_hatches_are_caught_however_spelled() {
    for line in [
        "find . -exec rm {} +",
        "find . -delete",
        "git -c core.pager=sh log",
        "git -C /tmp status",
        "cargo --config x test",
        "tar --to-command=sh -xf a.tar",
        "tar --to-comm=sh -xf a.tar",
        "tar --to-c sh -xf a.tar",
        "tar -Iprog -xf a.tar",
        "tar -xIprog -f a.tar",
        "tar --checkpoint-act=exec=sh -cf a.tar .",
        "make -fx",
        "make --fil=x",
        "make -Cdir",
        "make SHELL=/bin/sh",
        "npm --script-she=sh test",
        "npm exec foo",
        "cargo -Zunstable-options test",
        "cargo test --conf=x",
        "rsync -essh a b",
        "ssh -oProxyCommand=sh host",
        "ssh -o ProxyCommand=sh host",
        "find . -fprint0 /abs",
        "find . -fprint /abs",
        "git diff --output=../events.jsonl",
        "git diff --out=x",
        "git --exec=/x status",
        "git -cx=y log",
        "pytest -p evil",
        "pytest -pevil",
    ] {
        assert!(held(&split(line)), "{line}: {:?}", analyse(&split(line)));
    }
}

/// Issue 18 item 7: every spelling the outside testers found, and their relatives, is held.
#[test]
fn issue_18_listed_leaks_are_unvetted_or_wrappers() {
    for line in [
        // git: pagers, exec options, programs run per commit / per submodule / per file.
        "git grep -Ocat x",
        "git grep -O cat x",
        "git grep -iOcat x",
        "git grep --open-files-in-pager=cat x",
        "git grep --open-files-in-pager x",
        "git grep --open x",
        "git grep --ext-grep x",
        "git grep -e x -O cat",
        "git grep -e -- -O cat",
        "git rebase -x sh",
        "git rebase --exec=sh",
        "git rebase -i HEAD",
        "git difftool -x sh",
        "git difftool --extcmd=sh",
        "git difftool -t x",
        "git mergetool",
        "git bisect run sh",
        "git submodule foreach sh",
        "git -c x=y log",
        "git -C d status",
        "git --exec-path=d status",
        "git --git-dir=d status",
        "git --work-tree=d status",
        "git -p log",
        "git --paginate log",
        "git help log",
        "git --help",
        "git log --output=x",
        "git log --show-signature",
        "git diff --ext-diff",
        "git log --textconv",
        "git cat-file --filters x",
        "git cat-file --textconv x",
        "git config core.pager sh",
        "git commit -m x",
        "git tag v1",
        "git tag -v v1",
        "git branch x",
        "git branch -D x",
        "git fetch",
        "git archive --remote=x",
        "git-grep -Ocat x",
        "/usr/lib/git-core/git-grep -O x",
        "git-shell -c x",
        // editors and pagers as programs
        "nvim x",
        "view x",
        "ex x",
        "more x",
        "man git",
        "emacs x",
        "most x",
        "pg x",
        // find
        "find . -files0-from f",
        "find -files0-from f",
        "find . -execdir rm",
        "find . -ok rm",
        "find . -okdir rm",
        "find . -fls x",
        "find . -fprintf x y",
        "find -L .",
        "find . -follow",
        // tar
        "tar -T list -cf a.tar",
        "tar -cf a.tar -T list",
        "tar cfT a.tar list",
        "tar -cTlist -f a.tar",
        "tar --files-from=list -cf a.tar",
        "tar --files-fr list -cf a.tar",
        "tar -I sh -xf a.tar",
        "tar --use-compress-program=sh -xf a.tar",
        "tar --info-script=x -cf a.tar",
        "tar -F x -cf a.tar",
        "tar --rsh-command=x -xf a:b",
        "tar -xf host:a.tar",
        "tar xf host:a.tar",
        "tar --file=host:a.tar -x",
        "tar -xPf a.tar",
        "tar --remove-files -cf a.tar x",
        // make
        "make -f x",
        "make -C d",
        "make --eval=x",
        "make -E x",
        "make --directory=d",
        "make -I d",
        "make SHELL=/bin/sh",
        "make X=1 test",
        "make test MAKEFLAGS=x",
        // npm and friends
        "npm exec x",
        "npm x y",
        "npm explore x",
        "npm install",
        "npm ci",
        "npm help x",
        "npm --script-shell=sh test",
        "npm --prefix d test",
        "npm --userconfig f test",
        "npm --node-options=x test",
        "npm -C d test",
        "npm test -- --x",
        "npm test x",
        "npm run a b",
        "pnpm exec x",
        "pnpm dlx x",
        "yarn dlx x",
        "yarn run x",
        // pytest
        "pytest -p x",
        "pytest -c f",
        "pytest -o x=y",
        "pytest --rootdir=d",
        "pytest --confcutdir=d",
        "pytest --override-ini=x",
        "pytest --basetemp=d",
        "pytest --pdbcls=x:y",
        "pytest --junitxml=x",
        "pytest -W error::x",
        "python -m pytest -p x",
        "python3 -m pip install x",
        "python3 -m http.server",
        // cargo
        "cargo --config x test",
        "cargo -Zx test",
        "cargo test --manifest-path=x",
        "cargo test --target-dir=x",
        "cargo build --artifact-dir=x",
        "cargo run",
        "cargo +nightly test",
        "cargo test --target=x.json",
        "cargo doc --open",
        "cargo install x",
        "cargo rustc -- -C linker=x",
        "cargo help build",
        "cargo test -- --logfile x",
        "cargo clippy -- -C linker=x",
        "cargo clippy --fix",
        "cargo fmt -- --config-path x",
        "cargo build -- x",
        "cargo-clippy clippy",
        // rsync, zip, unzip, ssh, scp
        "rsync -e ssh a b",
        "rsync --rsh=ssh a b",
        "rsync a host:b",
        "rsync --rsync-path=x a b",
        "rsync --files-from=x a b",
        "zip -T a.zip f",
        "zip -TT sh a.zip f",
        "zip --unzip-command=sh a.zip f",
        "zip -m a.zip f",
        "unzip -Z a.zip",
        "ssh -o ProxyCommand=x h",
        "ssh -oProxyCommand=x h",
        "ssh -F cfg h",
        "ssh -J x h",
        "ssh h ls",
        "scp -S prog a h:b",
        "scp -o ProxyCommand=x a h:b",
        // interpreters without a script, with options off their list, and script languages
        "python3",
        "bash",
        "bash -s",
        "node -r x y.js",
        "perl -Mx y.pl",
        "sed 1eid f",
        "sed -n 1w/x f",
        "awk NR==1 f",
        "deno run https://example.com/x.ts",
        "bun x foo",
        "bun run x",
    ] {
        assert!(held(&split(line)), "{line}: {:?}", analyse(&split(line)));
    }
}

/// Issue 18 item 7: what the allow-lists are for — ordinary uses stay ordinary.
#[test]
fn issue_18_ordinary_uses_are_vetted() {
    for line in [
        "git diff --check",
        "git status --short",
        "git status -sb",
        "git status --porcelain=v2",
        "git log --oneline -5",
        "git log -n 3 --stat",
        "git log --onel",
        "git log --format=%h%x09%s",
        "git log --author alice",
        "git show HEAD --stat",
        "git diff --cached --stat",
        "git diff --no-ext",
        "git diff -U5 --word-diff",
        "git grep -n foo",
        "git grep -e foo -- src",
        "git grep -2 foo",
        "git branch",
        "git branch -a -v",
        "git branch --merged",
        "git branch --list x",
        "git tag",
        "git tag -l x",
        "git rev-parse --show-toplevel",
        "git rev-parse HEAD",
        "git ls-files",
        "git ls-tree -r HEAD",
        "git blame -L 1,5 src/a.rs",
        "git cat-file -p HEAD",
        "git describe --tags",
        "git merge-base HEAD main",
        "git --no-pager log",
        "git -P log",
        "git --version",
        "git version",
        "git-status --short",
        "/usr/bin/git status",
        "cargo test",
        "cargo test --color=always",
        "cargo test -p craik",
        "cargo test -p craik --locked",
        "cargo --locked test",
        "cargo -v test",
        "cargo build --release",
        "cargo check --workspace --all-targets",
        "cargo clippy --all-targets -- -D warnings",
        "cargo fmt --check",
        "cargo fmt --all -- --check",
        "cargo test -- --nocapture",
        "cargo test --test it",
        "cargo test foo -- --exact",
        "cargo tree -e normal",
        "cargo metadata --format-version=1 --no-deps",
        "cargo doc --no-deps",
        "cargo test --target x86_64-unknown-linux-gnu",
        "tar -xzf a.tar",
        "tar xzf a.tar",
        "tar -czf a.tar.gz src",
        "tar -tf a.tar",
        "tar -cf - src",
        "tar --list --file=a.tar",
        "tar --to-s -xf a.tar",
        "tar -xf a.tar -C out",
        "make",
        "make test",
        "make -j4 test",
        "make -j 4 test",
        "make -k -n all",
        "make --jobs=2",
        "make --dry",
        "npm test",
        "npm run build",
        "npm run",
        "npm -s test",
        "npm --silent run lint",
        "npm ls",
        "pnpm test",
        "pnpm run build",
        "yarn test",
        "pytest",
        "pytest -q tests",
        "pytest -x -k slow tests",
        "pytest --tb=short",
        "pytest -rA",
        "pytest -vv tests/unit",
        "pytest tests/a.py::test_x",
        "python -m pytest -q",
        "python3 -m pytest tests",
        "find . -name x.rs",
        "find . -type f -name x.rs -print",
        "find src -maxdepth 2 -type d",
        "find . -mtime -7",
        "find -name x",
        "find -H . -newermt 2020-01-01",
        "rsync -a src/ dst/",
        "rsync -av --exclude=target src dst",
        "zip -r a.zip src",
        "zip -9 -r a.zip src",
        "unzip -l a.zip",
        "unzip -o a.zip -d out",
        "unzip -qo a.zip",
        "ssh -V",
        "ssh -p 22 host",
        "scp -r a host:b",
        "python3 script.py",
        "python3 -B script.py",
        "bash script.sh",
        "sh -x script.sh",
        "sed -n 1,20p f",
        "sed 5q f",
        "node x.js",
        "deno test",
        "bun test",
    ] {
        let f = facts(line);
        assert!(!f.shell && !f.wrapper && !f.unvetted, "{line}: {f:?}");
    }
}

/// The reason names the first argument not on the list, as the tool would have read it.
#[test]
fn issue_18_unvetted_because_names_the_argument() {
    for (line, because) in [
        (
            "git grep -Ocat x",
            "`git grep -O` is not on git's allow-list",
        ),
        (
            "git grep -iOcat x",
            "`git grep -O` is not on git's allow-list",
        ),
        (
            "git rebase -x sh",
            "`git rebase` is not on git's allow-list",
        ),
        (
            "find . -files0-from f",
            "`find -files0-from` is not on find's allow-list",
        ),
        (
            "tar -T list -cf a.tar",
            "`tar -T` is not on tar's allow-list",
        ),
        (
            "git log --ou",
            "`git log --ou` is not on git's allow-list (it may abbreviate `--output`)",
        ),
        (
            "make SHELL=/bin/sh",
            "`make SHELL=/bin/sh` is not on make's allow-list (a variable assignment)",
        ),
        (
            "git grep -e -- -O cat",
            "`git grep -e --` is not on git's allow-list (a value that could be read as an \
             option)",
        ),
        (
            "cargo test -- --logfile x",
            "`cargo test -- --logfile` is not on cargo's allow-list",
        ),
        (
            "cargo-nextest run",
            "`cargo-nextest` is not on cargo's allow-list (an external cargo subcommand)",
        ),
        (
            "python3",
            "`python` is not on python's allow-list (no script is named, so the program would \
             come from standard input)",
        ),
    ] {
        assert_eq!(
            facts(line).unvetted_because.as_deref(),
            Some(because),
            "{line}"
        );
    }
    // Control bytes and long values are escaped and cut in the reason.
    let f = analyse(&argv(&["git", &format!("re\u{1b}[2J{}", "x".repeat(200))])).unwrap();
    let because = f.unvetted_because.unwrap();
    assert!(
        !because.contains('\u{1b}') && because.contains('…'),
        "{because}"
    );
}

/// How the reading follows each tool's own: `--` ends options, values are consumed, old-style
/// tar clusters, abbreviations only when every expansion is allowed.
#[test]
fn issue_18_options_are_read_as_the_tool_reads_them() {
    for (line, held_expected) in [
        // `--` ends options: what follows is paths for git, but not for make's assignments.
        ("git log -- -O", false),
        ("git grep foo -- -Ocat", false),
        ("make -- X=1", true),
        // A value that looks like an option is not trusted to be a value.
        ("git log --author -x", true),
        ("git grep -e -Ocat", true),
        ("git grep -eOcat", false),
        // ... except find's, which always takes the next argument.
        ("find . -name -exec", false),
        ("find . -mtime -7 -delete", true),
        // Old-style tar: every value-taking letter takes the next argument, in order.
        ("tar cf a.tar src", false),
        ("tar cfT a.tar list", true),
        ("tar xvfz a.tar", false),
        ("tar xf -Ix", true),
        // Abbreviations: all expansions allowed, or held.
        ("git log --onel", false),
        ("git log --no-ab", false),
        ("git grep --op", true),
        ("tar --to", true),
        ("make --fi=x", true),
        // An option given a value it does not take.
        ("git log --oneline=x", true),
        // Short clusters: a value-taking letter takes the rest of the cluster.
        ("git log -n5", false),
        ("git log -pn5", false),
        ("pytest -kO", false),
        ("pytest -qp x", true),
        // Whole-argument shorthands for npm and zip.
        ("npm -sq test", true),
        ("zip -rq a.zip x", true),
        // git branch and tag list; operands create unless listing.
        ("git branch -l x", false),
        ("git tag -n x", true),
        // ssh: one destination, no remote command.
        ("ssh host", false),
        ("ssh host -v", false),
        ("ssh -- host ls", true),
    ] {
        let f = facts(line);
        assert_eq!(f.unvetted || f.wrapper, held_expected, "{line}: {f:?}");
    }
}

/// Every long option `syntax` knows (allowed or documented) that it does not allow, spelled
/// `--name`, `--name=x`, as its one-letter abbreviation and as every unambiguous abbreviation
/// (no other known option starts with it; with `=x` too); every short option it does not
/// allow, alone, after an allowed flag in a cluster, and with an attached value: all held,
/// after `prefix`. Returns how many spellings were checked.
fn assert_off_list_held(prefix: &[&str], syntax: &Syntax) -> usize {
    let allowed_long = |name: &str| syntax.allowed(name).is_some_and(|(n, _)| n.len() > 1);
    let allowed_short = |name: &str| syntax.allowed(name).is_some_and(|(n, _)| n.len() == 1);
    let flag = syntax
        .allowed
        .iter()
        .flat_map(|t| entries(t))
        .find(|(n, takes)| n.chars().count() == 1 && *takes == Takes::Nothing)
        .map(|(n, _)| n);
    let mut names: Vec<&str> = syntax
        .allowed
        .iter()
        .chain(syntax.documented)
        .flat_map(|t| entries(t))
        .map(|(n, _)| n)
        .collect();
    names.sort_unstable();
    names.dedup();
    let longs: Vec<&str> = names.iter().copied().filter(|n| n.len() > 1).collect();
    let mut checked = 0;
    let mut check = |arg: String| {
        let mut words = argv(prefix);
        words.push(arg);
        assert!(held(&words), "{words:?}: {:?}", analyse(&words));
        checked += 1;
    };
    for name in &names {
        if name.chars().count() == 1 {
            if allowed_short(name) || (syntax.numeric && name.bytes().all(|b| b.is_ascii_digit())) {
                continue;
            }
            check(format!("-{name}"));
            check(format!("-{name}value"));
            if let Some(flag) = flag {
                check(format!("-{flag}{name}"));
                check(format!("-{flag}{name}value"));
            }
            continue;
        }
        if allowed_long(name) {
            continue;
        }
        check(format!("--{name}=x"));
        for (end, _) in name.char_indices().skip(1).chain([(name.len(), ' ')]) {
            let abbreviation = &name[..end];
            let from = longs.partition_point(|n| *n < abbreviation);
            let unambiguous = longs
                .get(from + 1)
                .is_none_or(|next| !next.starts_with(abbreviation));
            if allowed_long(abbreviation) || !(end == 1 || unambiguous) {
                continue;
            }
            check(format!("--{abbreviation}"));
            if unambiguous {
                check(format!("--{abbreviation}=x"));
            }
        }
    }
    checked
}

#[test]
fn issue_18_generated_git_options_off_the_list_are_held() {
    let mut checked = 0;
    // Aliases share their subcommand's syntax: the first name stands for them.
    for sub in GIT_SUBS {
        let name = sub.names.split_ascii_whitespace().next().unwrap();
        checked += assert_off_list_held(&["git", name], &sub.syntax);
    }
    assert!(checked > 10_000, "{checked}");
}

#[test]
fn issue_18_generated_git_global_options_off_the_list_are_held() {
    let global = Syntax::new(
        &[
            "no-pager P version no-optional-locks literal-pathspecs glob-pathspecs \
             noglob-pathspecs icase-pathspecs no-replace-objects no-lazy-fetch no-advice",
        ],
        &[
            "c= C= p paginate h help v exec-path? html-path man-path info-path git-dir= \
             work-tree= namespace= super-prefix= config-env= bare list-cmds= attr-source= \
             no-literal-pathspecs shallow-file=",
        ],
    );
    let mut checked = 0;
    for name in global
        .documented
        .iter()
        .flat_map(|t| entries(t))
        .map(|(n, _)| n)
    {
        let spellings = if name.len() == 1 {
            vec![format!("-{name}"), format!("-{name}x"), format!("-P{name}")]
        } else {
            vec![format!("--{name}"), format!("--{name}=x")]
        };
        for spelled in spellings {
            assert!(
                held(&argv(&["git", &spelled, "status"])),
                "git {spelled} status"
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "{checked}");
}

#[test]
fn issue_18_generated_cargo_options_off_the_list_are_held() {
    let mut checked = 0;
    for sub in CARGO_SUBS {
        for name in sub.names.split_ascii_whitespace() {
            checked += assert_off_list_held(&["cargo", name], &sub.syntax);
            match sub.after {
                super::tools::After::Read(after, _) => {
                    checked += assert_off_list_held(&["cargo", name, "--"], &after);
                }
                super::tools::After::Nothing => {
                    assert!(
                        held(&argv(&["cargo", name, "--", "x"])),
                        "cargo {name} -- x"
                    );
                }
                super::tools::After::Operands => {}
            }
        }
    }
    assert!(checked > 3_000, "{checked}");
}

#[test]
fn issue_18_generated_options_off_the_list_are_held() {
    let mut checked = 0;
    for (prefix, syntax) in [
        (&["tar"][..], &TAR),
        (&["tar", "-x"][..], &TAR),
        (&["make"][..], &MAKE),
        (&["npm"][..], &NPM),
        (&["npm", "test"][..], &NPM),
        (&["pytest"][..], &PYTEST),
        (&["py.test"][..], &PYTEST),
        (&["python3", "-m", "pytest"][..], &PYTEST),
        (&["rsync"][..], &RSYNC),
        (&["zip"][..], &ZIP),
        (&["unzip"][..], &UNZIP),
        (&["ssh"][..], &SSH),
        (&["scp"][..], &SCP),
        (&["sed", "-n"][..], &SED),
    ] {
        checked += assert_off_list_held(prefix, syntax);
    }
    assert!(checked > 5_000, "{checked}");
}

#[test]
fn issue_18_find_primaries_off_the_list_are_held() {
    for primary in FIND_DOC.split_ascii_whitespace() {
        if FIND_LEADING.split_ascii_whitespace().any(|p| p == primary) {
            continue;
        }
        for words in [
            vec!["find", ".", primary, "x"],
            vec!["find", primary, "x"],
            vec!["find", ".", "-name", "x", "-o", primary, "x"],
        ] {
            assert!(held(&argv(&words)), "{words:?}");
        }
    }
}

/// Issue 11 item 3: arguments that name paths get a target's normalisation.
#[test]
fn issue_11_argument_paths_stay_in_the_workspace() {
    let root = "/ws";
    for line in [
        "find . -name /etc/passwd",
        "cat /etc/passwd",
        "cat ../secret",
        "git diff --output=../events.jsonl",
        "cargo test --manifest-path=/tmp/x/Cargo.toml",
        "gcc -o/tmp/x a.c",
        "cat .git/config",
        "cat docs/../.craik/keys/signing.key.pem",
        "cat sub/.git/hooks/pre-commit",
        "cat ~/.ssh/id_rsa",
        "cat ~root/x",
        "ls /ws/../etc",
        "cat .github/workflows/ci.yml",
        "cat a://b/../../../etc/passwd",
        "cat --from=x://y/../../../../etc/shadow",
    ] {
        assert!(check_argument_paths(&split(line), root).is_err(), "{line}");
    }
    for line in [
        "pytest tests/unit",
        "cargo test -p craik",
        "ls .",
        "ls ./",
        "cat /ws/docs/a.md",
        "cat ./docs/a.md",
        "curl https://example.com/x",
        "make -j4",
    ] {
        assert_eq!(check_argument_paths(&split(line), root), Ok(()), "{line}");
    }
}

#[test]
fn limits_are_refused() {
    assert!(analyse(&[]).is_err());
    assert!(analyse(&vec!["a".to_owned(); MAX_ARGS + 1]).is_err());
    assert!(analyse(&["x".repeat(MAX_COMMAND_BYTES + 1)]).is_err());
}

/// Issue 19 item 5: `resource.paths` — every operand and option value that is a workspace
/// path, normalised; words count (`ls scripts`), options, URLs and paths outside do not.
#[test]
fn issue_19_argument_paths_are_normalised_operands() {
    let root = "/ws";
    let paths = |line: &str| argument_paths(&split(line), root);
    assert_eq!(paths("ls scripts"), ["scripts"]);
    // `-la` may be `-l a` (an attached value): counted, as a forbid must not miss it.
    assert_eq!(paths("ls -la ./scripts/"), ["a", "scripts"]);
    assert_eq!(
        paths("cat src/../scripts/a.sh /ws/docs/x.md"),
        ["docs/x.md", "scripts/a.sh"]
    );
    assert_eq!(
        paths("cat --file=scripts/x -oout/y"),
        ["out/y", "scripts/x"]
    );
    assert_eq!(paths("cat a a ./a"), ["a"]);
    for line in [
        "ls",
        "ls -l .",
        "curl https://example.com/x",
        "cat /etc/passwd",
        "cat ../outside",
        "cat --verbose -v",
    ] {
        assert_eq!(paths(line), Vec::<String>::new(), "{line}");
    }
}

/// git's options of one subcommand as the installed git documents them: the long names of
/// `git SUB --git-completion-helper-all` and `git SUB -h` (a value-taking one as `name=`),
/// and the short letters of `-h` with the long option each stands for (`u=upload-pack`).
/// `submodule` (a script with no completion helper) is read from its usage lines.
fn installed_git_options(repo: &std::path::Path, sub: &str) -> (String, String) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("LC_ALL", "C")
            .args(args)
            .output()
            .expect("git runs");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let mut long: std::collections::BTreeMap<String, bool> = std::collections::BTreeMap::new();
    let mut add = |name: &str, value: bool| {
        let name = name.trim_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '-'));
        if name.len() > 1 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            let v = long.entry(name.to_owned()).or_insert(false);
            *v |= value;
        }
    };
    if sub != "submodule" {
        for word in run(&[sub, "--git-completion-helper-all"]).split_ascii_whitespace() {
            if let Some(name) = word.strip_prefix("--") {
                match name.strip_suffix('=') {
                    Some(n) => add(n, true),
                    None => add(name, false),
                }
            }
        }
    }
    let help = run(&[sub, "-h"]);
    let mut short = std::collections::BTreeMap::new();
    for line in help.lines() {
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            let value_next = words
                .get(i + 1)
                .is_some_and(|n| n.starts_with('<') || n.starts_with("[<"));
            // `-u, --[no-]upload-pack <path>` and the usage lines' `-f|--force`.
            for part in w
                .trim_matches(|c| c == '[' || c == ']' || c == '(' || c == ')')
                .split('|')
            {
                let part = part.trim_end_matches(',');
                if let Some(name) = part.strip_prefix("--") {
                    let name = name.strip_prefix("[no-]").unwrap_or(name);
                    let (name, value) = match name.split_once(['=', '[']) {
                        Some((n, _)) => (n, true),
                        None => (name, value_next),
                    };
                    add(name, value && !name.is_empty());
                }
            }
        }
        let trimmed = line.trim_start();
        let first = trimmed.split([',', '|', ' ']).next().unwrap_or_default();
        if let Some(letter) = first.strip_prefix('-')
            && letter.len() == 1
            && letter.bytes().all(|b| b.is_ascii_alphanumeric())
            && let Some(rest) = trimmed.get(2..)
            && let Some(after) = rest.trim_start_matches([',', '|', ' ']).strip_prefix("--")
        {
            let name = after.strip_prefix("[no-]").unwrap_or(after);
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            short.insert(letter.to_owned(), name);
        }
    }
    let long = long
        .into_iter()
        .map(|(n, v)| if v { format!("{n}=") } else { n })
        .collect::<Vec<_>>()
        .join(" ");
    let short = short
        .into_iter()
        .map(|(l, n)| format!("{l}={n}"))
        .collect::<Vec<_>>()
        .join(" ");
    (long, short)
}

/// Issue 30 item 2: the generated option tables of git's subcommands that reach other
/// repositories or write archives are git's own: compared with the installed git, so a git
/// that grows an option (or a short form of one) fails here, and the message is the table to
/// paste into `git_options.rs` after classifying the new option.
#[test]
fn issue_30_git_option_tables_match_the_installed_git() {
    let dir = std::env::temp_dir().join(format!("craik-git-options-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("git is installed");
    assert!(init.success());
    let mut generated = String::new();
    let mut differ = Vec::new();
    for table in super::git_options::GIT_OPTIONS {
        let (long, short) = installed_git_options(&dir, table.sub);
        generated.push_str(&format!(
            "pub(super) const {}: GitOptions = GitOptions {{\n    sub: \"{}\",\n    long: \"{long}\",\n    short: \"{short}\",\n}};\n",
            table.sub.to_ascii_uppercase().replace('-', "_"),
            table.sub
        ));
        if long != table.long || short != table.short {
            differ.push(table.sub);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        differ.is_empty(),
        "the installed git documents other options for {differ:?}; classify them (hatches.rs) and paste:\n{generated}"
    );
}

/// Issue 30 item 2: git's exec options are denied in every spelling, short forms read with
/// the subcommand's own generated table (`clone -u` is `--upload-pack`, `push -u` is not);
/// whatever else a network subcommand is given is unvetted (a person approves it).
#[test]
fn issue_30_git_exec_options_are_denied_however_spelled() {
    for line in [
        "git clone -u ./x.sh https://h/r",
        "git clone -u./x.sh https://h/r",
        "git clone -qu./x.sh https://h/r",
        "git clone --upload-pack=./x.sh https://h/r",
        "git clone --upload-pack ./x.sh https://h/r",
        "git clone --upl=./x.sh https://h/r",
        "git clone --template=./t https://h/r",
        "git clone -c core.hooksPath=h https://h/r",
        "git clone --config core.fsmonitor=x https://h/r",
        "git -c core.sshCommand=x clone https://h/r",
        "git fetch --upload-pack=./x.sh origin",
        "git pull --upl ./x.sh origin",
        "git ls-remote --upload-pack=./x.sh origin",
        "git push --receive-pack=./x.sh origin",
        "git push --exec=./x.sh origin",
        "git archive -o x.tar HEAD",
        "git archive --remote=r --exec=./x.sh HEAD",
        "git init --template=./t",
        "git-clone -u ./x.sh https://h/r",
        "git-fetch --upload-pack=./x.sh origin",
    ] {
        let f = facts(line);
        assert!(f.wrapper && f.unvetted, "{line}: {f:?}");
    }
    for line in [
        "git clone -q https://h/r",
        "git fetch -u origin",
        "git push -u origin main",
        "git push -o ci.skip origin",
        "git ls-remote -q origin",
        "git submodule update --init",
    ] {
        let f = facts(line);
        assert!(f.unvetted && !f.wrapper, "{line}: {f:?}");
    }
    assert!(!facts("git status -u").unvetted);
}
