//! The multiplexers — programs that can run other programs or read hidden arguments — and the
//! allow-list of each: the subcommands, options and operands known to be safe (read-mostly,
//! never running a program or a user-supplied command, never naming a config or script to
//! execute). Anything else is *unvetted*.
//!
//! INVARIANT: this is an allow-list. A subcommand, option, abbreviation, value or operand that
//! is not listed here makes the command unvetted; nothing is accepted because it is missing
//! from a list of known-bad spellings. The `*_DOC` tables list options the tools document but
//! that are not allowed: they only make abbreviations resolve as the tool would (an
//! abbreviation that could mean one of them is unvetted) and feed the generated tests.

use super::git_options;
use super::scan::{self, Miss, Read, Syntax, Table, Takes};

/// What may stand as operands (non-option arguments before `--`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Operands {
    Any,
    AtMost(usize),
    /// Only when `-l`/`--list` is given (git `branch` and `tag` create one otherwise).
    WithList,
}

/// What may follow `--`.
#[derive(Debug, Clone, Copy)]
pub(super) enum After {
    /// Operands (paths, test filters), read as [`Operands::Any`].
    Operands,
    /// Nothing: arguments after `--` go to a program that is not vetted here.
    Nothing,
    /// Arguments for a second program, read with its own allow-list.
    Read(Syntax, Operands),
}

/// One subcommand and its allow-list.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sub {
    /// Its names (aliases included), separated by spaces.
    pub(super) names: &'static str,
    pub(super) syntax: Syntax,
    pub(super) operands: Operands,
    pub(super) after: After,
}

impl Sub {
    const fn new(names: &'static str, syntax: Syntax) -> Self {
        Self {
            names,
            syntax,
            operands: Operands::Any,
            after: After::Operands,
        }
    }

    const fn operands(mut self, operands: Operands) -> Self {
        self.operands = operands;
        self
    }

    const fn after(mut self, after: After) -> Self {
        self.after = after;
        self
    }

    fn named(&self, name: &str) -> bool {
        self.names.split_ascii_whitespace().any(|n| n == name)
    }
}

fn find<'a>(subs: &'a [Sub], name: &str) -> Option<&'a Sub> {
    subs.iter().find(|s| s.named(name))
}

/// Reads `args` with the subcommand's allow-list and checks its operands and what follows `--`.
fn check<'a>(sub: &Sub, args: &'a [String]) -> Result<Read<'a>, Miss> {
    let read = scan::read(&sub.syntax, args)?;
    operands(&read, sub.operands)?;
    if let Some(after) = read.after {
        match sub.after {
            After::Operands => {}
            After::Nothing => {
                if let Some(first) = after.first() {
                    return Err(Miss::new(format!("-- {first}"))
                        .because("arguments after `--` go to a program not vetted here"));
                }
            }
            After::Read(syntax, rule) => {
                let more = scan::read(&syntax, after).map_err(|m| m.prefixed("--"))?;
                operands(&more, rule).map_err(|m| m.prefixed("--"))?;
                if let Some(extra) = more.after.and_then(<[String]>::first) {
                    return Err(Miss::new(format!("-- -- {extra}")));
                }
            }
        }
    }
    Ok(read)
}

fn operands(read: &Read<'_>, rule: Operands) -> Result<(), Miss> {
    let extra = match rule {
        Operands::Any => None,
        Operands::AtMost(n) => read.operands.get(n),
        Operands::WithList if read.has("l") || read.has("list") => None,
        Operands::WithList => read.operands.first(),
    };
    match extra {
        None => Ok(()),
        Some(extra) => Err(Miss::new(*extra).because(match rule {
            Operands::WithList => "an operand here creates a ref; only listing is allowed",
            _ => "an operand this subcommand is not allowed to take",
        })),
    }
}

impl Miss {
    fn prefixed(mut self, prefix: &str) -> Self {
        self.spelled = if self.spelled.is_empty() {
            prefix.to_owned()
        } else {
            format!("{prefix} {}", self.spelled)
        };
        self
    }
}

/// A multiplexer: its name in messages and how its arguments are vetted.
type Vet = fn(&[String]) -> Result<(), Miss>;

const TOOLS: &[(&str, &str, Vet)] = &[
    // (name in messages, argv[0] base names, vetting)
    ("git", "git", git),
    ("cargo", "cargo", cargo),
    ("find", "find gfind", find_expression),
    ("tar", "tar gtar bsdtar", tar),
    ("make", "make gmake", make),
    ("npm", "npm", npm),
    ("pnpm", "pnpm", pnpm),
    ("yarn", "yarn", yarn),
    ("pytest", "pytest py.test", pytest),
    ("rsync", "rsync", rsync),
    ("zip", "zip", zip),
    ("unzip", "unzip", unzip),
    ("ssh", "ssh", ssh),
    ("scp", "scp", scp),
    ("python", "python pypy", python),
    ("sh", "sh bash zsh dash ksh mksh ash fish csh tcsh", shell),
    ("perl", "perl", perl),
    ("ruby", "ruby", ruby),
    ("node", "node nodejs", no_options),
    ("php", "php", no_options),
    ("lua", "lua luajit", no_options),
    ("tclsh", "tclsh wish expect", no_options),
    ("pwsh", "pwsh powershell", no_options),
    ("osascript", "osascript", no_options),
    ("deno", "deno", deno),
    ("bun", "bun", bun),
    ("sed", "sed gsed", sed),
    ("awk", "awk gawk mawk nawk busybox-awk", awk),
];

/// The multiplexer named `base` (argv[0]'s normalised base name), if it is one.
pub(super) fn multiplexer(base: &str) -> Option<(&'static str, Vet)> {
    TOOLS
        .iter()
        .find(|(_, names, _)| names.split_ascii_whitespace().any(|n| n == base))
        .map(|(name, _, vet)| (*name, *vet))
}

/// Why `base args…` is unvetted, or `None` when `base` is no multiplexer or everything it
/// was given is on its allow-list. `git-<sub>` (a git-core program run directly) is read as
/// `git <sub>`, and `cargo-<sub>` (an external cargo subcommand) is never vetted.
pub(super) fn vet(base: &str, args: &[String]) -> Option<String> {
    let (tool, result) = if let Some(sub) = base.strip_prefix("git-") {
        let argv: Vec<String> = std::iter::once(sub.to_owned())
            .chain(args.iter().cloned())
            .collect();
        ("git", git(&argv))
    } else if base.starts_with("cargo-") {
        return Some(format!(
            "`{}` is not on cargo's allow-list (an external cargo subcommand)",
            craik_contracts::Truncated(base)
        ));
    } else {
        let (tool, vet) = multiplexer(base)?;
        (tool, vet(args))
    };
    let miss = result.err()?;
    let what = if miss.spelled.is_empty() {
        tool.to_owned()
    } else {
        format!("{tool} {}", miss.spelled)
    };
    Some(format!(
        "`{}` is not on {tool}'s allow-list{}",
        craik_contracts::Truncated(&what),
        miss.because
            .map(|b| format!(" ({})", craik_contracts::one_line(&b)))
            .unwrap_or_default()
    ))
}

// ---------------------------------------------------------------------------------------------
// git

/// Global options (before the subcommand). `-c`, `-C`, `--exec-path`, `--git-dir`,
/// `--work-tree`, `--namespace`, `--config-env`, `-p`/`--paginate`, `--help` are not here.
const GIT_GLOBAL_ALLOWED: Table = "no-pager P version no-optional-locks literal-pathspecs \
    glob-pathspecs noglob-pathspecs icase-pathspecs no-replace-objects no-lazy-fetch no-advice";
const GIT_GLOBAL_DOC: Table = "c= C= p paginate h help v exec-path? html-path man-path info-path \
    git-dir= work-tree= namespace= super-prefix= config-env= bare list-cmds= attr-source= \
    literal-pathspecs no-literal-pathspecs shallow-file=";
const GIT_GLOBAL: Syntax = Syntax::new(&[GIT_GLOBAL_ALLOWED], &[GIT_GLOBAL_DOC]).stop_at_operand();

/// Diff output options (diff, log, show, the diff plumbing). Not here: `--output`, `--ext-diff`,
/// `--textconv`, `-O<orderfile>`.
const GIT_DIFF: Table = "p u patch s no-patch U= unified= output-indicator-new= \
    output-indicator-old= output-indicator-context= raw patch-with-raw t indent-heuristic \
    no-indent-heuristic minimal patience histogram anchored= diff-algorithm= stat? stat-width= \
    stat-name-width= stat-graph-width= stat-count= compact-summary numstat shortstat X? dirstat? \
    cumulative dirstat-by-file? summary patch-with-stat z name-only name-status submodule? color? \
    no-color color-moved? no-color-moved color-moved-ws= no-color-moved-ws word-diff? \
    word-diff-regex= color-words? no-renames renames rename-empty no-rename-empty check \
    ws-error-highlight= full-index binary abbrev? no-abbrev B? break-rewrites? M? find-renames? C? \
    find-copies? find-copies-harder D irreversible-delete l= diff-filter= S= G= find-object= \
    pickaxe-all pickaxe-regex skip-to= rotate-to= R relative? no-relative a text ignore-cr-at-eol \
    ignore-space-at-eol b ignore-space-change w ignore-all-space ignore-blank-lines I= \
    ignore-matching-lines= inter-hunk-context= W function-context exit-code quiet no-ext-diff \
    no-textconv ignore-submodules? src-prefix= dst-prefix= no-prefix default-prefix line-prefix= \
    ita-invisible-in-index ita-visible-in-index max-depth=";
/// How merges are diffed.
const GIT_MERGES: Table = "m c cc dd remerge-diff diff-merges= no-diff-merges combined-all-paths";
/// Revision walking and commit formatting (log, show, shortlog, rev-list). Not here:
/// `--show-signature` (runs gpg).
const GIT_REV: Table = "n= max-count= skip= since= after= since-as-filter= until= before= \
    author= committer= grep-reflog= grep= all-match invert-grep i regexp-ignore-case \
    basic-regexp E extended-regexp F fixed-strings P perl-regexp remove-empty merges no-merges \
    min-parents= max-parents= no-min-parents no-max-parents first-parent \
    exclude-first-parent-only not all branches? tags? remotes? glob= exclude= exclude-hidden= \
    reflog alternate-refs single-worktree ignore-missing bisect stdin cherry-mark cherry-pick \
    left-only right-only cherry g walk-reflogs merge boundary simplify-by-decoration show-pulls \
    full-history dense sparse simplify-merges ancestry-path? date-order author-date-order \
    topo-order reverse no-walk? do-walk pretty? format= abbrev-commit no-abbrev-commit oneline \
    encoding= expand-tabs? no-expand-tabs notes? no-notes show-notes? show-notes-by-default \
    standard-notes no-standard-notes relative-date date= parents children left-right graph \
    show-linear-break?";
const GIT_LOG: Table = "follow full-diff L= log-size decorate? no-decorate decorate-refs= \
    decorate-refs-exclude= clear-decorations source use-mailmap no-use-mailmap mailmap no-mailmap";
const GIT_DIFF_CMD: Table = "cached staged merge-base no-index base ours theirs";
const GIT_DIFF_PLUMBING: Table =
    "r root stdin no-commit-id v pretty? format= abbrev? always merge-base cached q";
const GIT_SHORTLOG: Table = "n numbered s summary e email format? group= c committer w?";
const GIT_REV_LIST: Table = "count timestamp header objects objects-edge \
    objects-edge-aggressive unpacked object-names no-object-names disk-usage? missing= filter= \
    no-filter filter-print-omitted in-commit-order indexed-objects quiet use-bitmap-index \
    progress= exclude-promisor-objects";
const GIT_STATUS: Table = "s short b branch show-stash porcelain? long v verbose u? \
    untracked-files? ignore-submodules? ignored? z no-column ahead-behind no-ahead-behind \
    renames no-renames find-renames?";
const GIT_LS_FILES: Table = "c cached d deleted m modified o others i ignored s stage u \
    unmerged k killed directory no-empty-directory eol deduplicate z t v f full-name \
    recurse-submodules abbrev? debug sparse format= error-unmatch with-tree= x= exclude= X= \
    exclude-from= exclude-per-directory= exclude-standard resolve-undo";
const GIT_LS_TREE: Table = "d r t l long z name-only name-status object-only full-name \
    full-tree abbrev? format=";
const GIT_REV_PARSE: Table = "verify q quiet sq short? abbrev-ref? symbolic \
    symbolic-full-name all branches? tags? remotes? glob= exclude= exclude-hidden= disambiguate= \
    git-dir git-common-dir absolute-git-dir show-toplevel show-cdup show-prefix \
    show-superproject-working-tree is-inside-git-dir is-inside-work-tree is-bare-repository \
    is-shallow-repository shared-index-path show-object-format? show-ref-format local-env-vars \
    path-format= git-path= resolve-git-dir= since= after= until= before= revs-only no-revs \
    flags no-flags not default= prefix= keep-dashdash stop-at-non-option stuck-long";
/// Not here: `--contents`, `-S <revs-file>`, `--ignore-revs-file` (hidden inputs).
const GIT_BLAME: Table = "b root show-stats L= l t reverse first-parent p porcelain \
    line-porcelain incremental encoding= date= progress no-progress M? C? ignore-rev= \
    color-lines color-by-age score-debug f show-name n show-number s e show-email w abbrev? c \
    minimal no-textconv diff-algorithm=";
/// Not here: `-O`/`--open-files-in-pager` (runs a pager), `--ext-grep`, `--textconv`.
const GIT_GREP: Table = "cached untracked no-index no-exclude-standard exclude-standard \
    recurse-submodules a text no-textconv i ignore-case I max-depth= r recursive no-recursive w \
    word-regexp v invert-match h H full-name E extended-regexp G basic-regexp P perl-regexp F \
    fixed-strings n line-number column l files-with-matches name-only L files-without-match z \
    null o only-matching c count color? no-color break heading p show-function A= \
    after-context= B= before-context= C= context= W function-context m= max-count= threads= f= \
    e= and or not all-match q quiet";
/// Listing only: no `-d`, `-D`, `-m`, `-M`, `-c`, `-C`, `-u`, `--set-upstream-to`, `--edit-description`, ...
const GIT_BRANCH: Table = "a all r remotes l list v verbose q quiet color? no-color \
    no-column sort= merged~ no-merged~ contains~ no-contains~ points-at= format= show-current \
    i ignore-case omit-empty abbrev? no-abbrev";
/// Listing only: no `-a`, `-s`, `-u`, `-m`, `-F`, `-d`, `-v` (runs gpg), ...
const GIT_TAG: Table = "l list n? sort= contains~ no-contains~ merged~ no-merged~ points-at~ \
    format= color? i ignore-case omit-empty no-column";
/// Not here: `--textconv`, `--filters` (run configured programs), `--batch-command`.
const GIT_CAT_FILE: Table = "t s e p batch? batch-check? batch-all-objects buffer unordered \
    follow-symlinks Z allow-unknown-type use-mailmap mailmap no-use-mailmap no-mailmap";
const GIT_DESCRIBE: Table = "all tags contains abbrev= candidates= exact-match debug long \
    match= exclude= always first-parent dirty? broken?";
const GIT_MERGE_BASE: Table = "a all octopus independent is-ancestor fork-point";
const GIT_NAME_REV: Table =
    "tags refs= exclude= all annotate-stdin stdin name-only no-undefined always";
const GIT_COUNT_OBJECTS: Table = "v verbose H human-readable";
const GIT_SHOW_REF: Table = "head heads branches tags d dereference s hash? verify abbrev? q \
    quiet exclude-existing? exists";
/// Not here: `--shell`, `--perl`, `--python`, `--tcl` (output meant to be evaluated).
const GIT_FOR_EACH_REF: Table = "count= sort= format= color? points-at= merged~ no-merged~ \
    contains~ no-contains~ ignore-case omit-empty exclude= include-root-refs";
const GIT_CHECK_IGNORE: Table = "q quiet v verbose stdin z n non-matching no-index";
const GIT_CHECK_ATTR: Table = "a all cached stdin z source=";
const GIT_VERSION: Table = "build-options";

/// Options git documents that are on no allow-list here (for abbreviations and tests): the
/// escape hatches of the allowed subcommands and the options of the others.
const GIT_DOC: Table = "O? open-files-in-pager? ext-grep textconv ext-diff output= \
    show-signature exec= x= exec-path upload-pack= receive-pack= tool= t extcmd= tool-help \
    dir-diff g gui no-gui y trust-exit-code no-trust-exit-code prompt no-prompt symlinks \
    no-symlinks interactive rebase-merges? no-rebase-merges autosquash no-autosquash autostash \
    no-autostash onto= keep-base root edit-todo continue abort skip quit show-current-patch \
    strategy= strategy-option= gpg-sign? no-gpg-sign signoff no-signoff verify no-verify amend \
    message= file= template= cleanup= reuse-message= reedit-message= fixup= squash= \
    reset-author only include pathspec-from-file= pathspec-file-nul dry-run contents= \
    ignore-revs-file= batch-command? filters path= column? shell perl python tcl \
    output-directory= cover-letter to= cc= in-reply-to= subject-prefix= rfc numbered-files \
    suffix= attach? inline? thread? stdout force recursive remote= upstream= set-upstream-to= \
    unset-upstream track? no-track delete move copy edit-description create-reflog annotate sign \
    local-user= orphan= detach ours theirs conflict= patch worktree ignore-other-worktrees \
    no-recurse-submodules progress depth= shallow-since= shallow-exclude= unshallow \
    update-shallow refmap= prune prune-tags no-tags jobs= ipv4 ipv6 mirror origin= template= \
    reference= dissociate separate-git-dir= also-filter-submodules single-branch \
    no-single-branch shallow-submodules server-option= bundle-uri= list get get-all get-regexp \
    get-urlmatch replace-all add unset unset-all rename-section remove-section global system \
    blob= edit type= bool int bool-or-int null show-origin show-scope default= includes \
    no-includes fixed-value command= run foreach sync init deinit update set-branch set-url \
    absorbgitdirs whitespace= apply index 3way reject directory= unidiff-zero allow-empty keep \
    keep-non-patch scissors no-scissors committer-date-is-author-date ignore-date resolved \
    remote-name archive worktree-attributes mtime= add-file= parseopt sq-quote trailer= \
    no-edit no-commit no-ff ff-only squash log? stat-only recurse-submodules-default= \
    no-column k e";
/// Every git option table, for abbreviations: an abbreviation of an option git takes
/// elsewhere is not read as one of this subcommand's.
const GIT_ALL: &[Table] = &[
    GIT_DOC,
    git_options::CLONE.long,
    git_options::FETCH.long,
    git_options::PULL.long,
    git_options::PUSH.long,
    git_options::LS_REMOTE.long,
    git_options::ARCHIVE.long,
    git_options::SUBMODULE.long,
    GIT_GLOBAL_DOC,
    GIT_DIFF,
    GIT_MERGES,
    GIT_REV,
    GIT_LOG,
    GIT_DIFF_CMD,
    GIT_DIFF_PLUMBING,
    GIT_SHORTLOG,
    GIT_REV_LIST,
    GIT_STATUS,
    GIT_LS_FILES,
    GIT_LS_TREE,
    GIT_REV_PARSE,
    GIT_BLAME,
    GIT_GREP,
    GIT_BRANCH,
    GIT_TAG,
    GIT_CAT_FILE,
    GIT_DESCRIBE,
    GIT_MERGE_BASE,
    GIT_NAME_REV,
    GIT_COUNT_OBJECTS,
    GIT_SHOW_REF,
    GIT_FOR_EACH_REF,
    GIT_CHECK_IGNORE,
    GIT_CHECK_ATTR,
    GIT_VERSION,
];

const fn git_sub(names: &'static str, allowed: &'static [Table]) -> Sub {
    Sub::new(names, Syntax::new(allowed, GIT_ALL))
}

/// git's allowed subcommands. Everything else (rebase, bisect, submodule, difftool, commit,
/// fetch, config, help, aliases, ...) is unvetted.
pub(super) const GIT_SUBS: &[Sub] = &[
    git_sub("status", &[GIT_STATUS]),
    Sub::new(
        "diff",
        Syntax::new(&[GIT_DIFF_CMD, GIT_MERGES, GIT_DIFF], GIT_ALL).numeric(),
    ),
    Sub::new(
        "log whatchanged show",
        Syntax::new(&[GIT_LOG, GIT_REV, GIT_MERGES, GIT_DIFF], GIT_ALL).numeric(),
    ),
    Sub::new(
        "diff-tree diff-index diff-files",
        Syntax::new(&[GIT_DIFF_PLUMBING, GIT_MERGES, GIT_DIFF], GIT_ALL).numeric(),
    ),
    Sub::new(
        "shortlog",
        Syntax::new(&[GIT_SHORTLOG, GIT_REV], GIT_ALL).numeric(),
    ),
    Sub::new(
        "rev-list",
        Syntax::new(&[GIT_REV_LIST, GIT_REV], GIT_ALL).numeric(),
    ),
    git_sub("ls-files", &[GIT_LS_FILES]),
    git_sub("ls-tree", &[GIT_LS_TREE]),
    git_sub("rev-parse", &[GIT_REV_PARSE]),
    git_sub("blame annotate", &[GIT_BLAME]),
    Sub::new("grep", Syntax::new(&[GIT_GREP], GIT_ALL).numeric()),
    git_sub("branch", &[GIT_BRANCH]).operands(Operands::WithList),
    git_sub("tag", &[GIT_TAG]).operands(Operands::WithList),
    git_sub("cat-file", &[GIT_CAT_FILE]),
    git_sub("describe", &[GIT_DESCRIBE]),
    git_sub("merge-base", &[GIT_MERGE_BASE]),
    git_sub("name-rev", &[GIT_NAME_REV]),
    git_sub("count-objects", &[GIT_COUNT_OBJECTS]).operands(Operands::AtMost(0)),
    git_sub("show-ref", &[GIT_SHOW_REF]),
    git_sub("for-each-ref", &[GIT_FOR_EACH_REF]),
    git_sub("check-ignore", &[GIT_CHECK_IGNORE]),
    git_sub("check-attr", &[GIT_CHECK_ATTR]),
    git_sub("version", &[GIT_VERSION]).operands(Operands::AtMost(0)),
];

fn git(args: &[String]) -> Result<(), Miss> {
    let global = scan::read(&GIT_GLOBAL, args)?;
    let rest = args.get(global.stop..).unwrap_or_default();
    let Some((name, rest)) = rest.split_first() else {
        return Ok(());
    };
    let sub = find(GIT_SUBS, name).ok_or_else(|| Miss::new(name.clone()))?;
    check(sub, rest).map_err(|m| m.prefixed(name))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// cargo

/// Options cargo takes anywhere. Not here: `--config`, `-Z`, `-C`, `--explain`.
const CARGO_GLOBAL: Table = "V version v verbose q quiet color= frozen locked offline h help";
/// Package and target selection, features, profiles (build, check, test, bench, clippy, doc).
/// Not here: `--manifest-path`, `--target-dir`, `--artifact-dir`, `--lockfile-path`; `--target`
/// only names a target triple (a path would name a target spec with its own linker).
const CARGO_BUILD: Table = "p= package= workspace all exclude= lib bins bin~ examples \
    example~ tests test~ benches bench~ all-targets F= features= all-features \
    no-default-features r release profile= target= j= jobs= keep-going message-format= \
    timings? future-incompat-report ignore-rust-version";
const CARGO_TEST: Table = "doc no-run no-fail-fast";
/// Not here: `--open` (runs a browser).
const CARGO_DOC_CMD: Table = "no-deps document-private-items";
/// Not here: `--fix` and the options that go with it.
const CARGO_CLIPPY: Table = "no-deps";
const CARGO_FMT: Table = "all check p= package= message-format= v verbose q quiet h help";
const CARGO_TREE: Table = "p= package= workspace exclude= e= edges= i= invert= prune= depth= \
    prefix= no-dedupe d duplicates charset= f= format= target= all-targets F= features= \
    all-features no-default-features";
const CARGO_METADATA: Table =
    "format-version= no-deps filter-platform= F= features= all-features no-default-features";
/// What `cargo test -- …` passes to the test harness (libtest). Not here: `--logfile`.
const LIBTEST: Table = "ignored include-ignored nocapture no-capture test-threads= exact skip= \
    q quiet list format= color= show-output test bench exclude-should-panic report-time shuffle \
    shuffle-seed=";
const LIBTEST_DOC: Table = "logfile= Z= h help force-run-in-process ensure-time";
/// What `cargo clippy -- …` passes to clippy-driver: lint levels only (no `-C`, `--cfg`, ...).
const CLIPPY_DRIVER: Table = "D= W= A= F= deny= warn= allow= forbid= cap-lints=";
const CLIPPY_DRIVER_DOC: Table = "C= codegen= cfg= L= l= o= out-dir= extern= sysroot= \
    target= crate-type= crate-name= edition= emit= print= g O explain= test Z= json= \
    error-format= remap-path-prefix= check-cfg= env-set=";
/// What `cargo fmt -- …` passes to rustfmt. Not here: `--config-path`, `--config`.
const RUSTFMT: Table = "check edition= emit= color= l files-with-diff v verbose q quiet";
const RUSTFMT_DOC: Table = "config-path= config= backup print-config= unstable-features \
    error-on-unformatted skip-children style-edition= h help V version";
/// Options cargo documents that are on no allow-list here.
const CARGO_DOC: Table = "config= Z= C= manifest-path= target-dir= artifact-dir= out-dir= \
    lockfile-path= explain= list unit-graph build-plan open fix allow-dirty allow-staged \
    allow-no-vcs broken-code edition= registry= index= token= dry-run no-verify vcs= name= \
    path= git= branch= tag= rev= root= force precise= aggressive recursive dev build optional \
    rename= default-features remove install-root e i f d n o";
const CARGO_ALL: &[Table] = &[
    CARGO_DOC,
    CARGO_GLOBAL,
    CARGO_BUILD,
    CARGO_TEST,
    CARGO_DOC_CMD,
    CARGO_CLIPPY,
    CARGO_FMT,
    CARGO_TREE,
    CARGO_METADATA,
];
const CARGO_GLOBAL_SYNTAX: Syntax = Syntax::new(&[CARGO_GLOBAL], CARGO_ALL).stop_at_operand();

/// cargo's allowed subcommands. Not here: `run` (an arbitrary binary with arbitrary
/// arguments: name it in a grant and approve it), `install`, `publish`, `rustc`, `rustdoc`,
/// `fix`, `help` (runs man), external subcommands, aliases.
pub(super) const CARGO_SUBS: &[Sub] = &[
    Sub::new(
        "build b check c",
        Syntax::new(&[CARGO_BUILD, CARGO_GLOBAL], CARGO_ALL),
    )
    .operands(Operands::AtMost(0))
    .after(After::Nothing),
    Sub::new(
        "test t bench",
        Syntax::new(&[CARGO_TEST, CARGO_BUILD, CARGO_GLOBAL], CARGO_ALL),
    )
    .after(After::Read(
        Syntax::new(&[LIBTEST], &[LIBTEST_DOC]),
        Operands::Any,
    )),
    Sub::new(
        "clippy",
        Syntax::new(&[CARGO_CLIPPY, CARGO_BUILD, CARGO_GLOBAL], CARGO_ALL),
    )
    .operands(Operands::AtMost(0))
    .after(After::Read(
        Syntax::new(&[CLIPPY_DRIVER], &[CLIPPY_DRIVER_DOC]),
        Operands::AtMost(0),
    )),
    Sub::new(
        "doc d",
        Syntax::new(&[CARGO_DOC_CMD, CARGO_BUILD, CARGO_GLOBAL], CARGO_ALL),
    )
    .operands(Operands::AtMost(0))
    .after(After::Nothing),
    Sub::new("fmt", Syntax::new(&[CARGO_FMT], CARGO_ALL))
        .operands(Operands::AtMost(0))
        .after(After::Read(
            Syntax::new(&[RUSTFMT], &[RUSTFMT_DOC]),
            Operands::Any,
        )),
    Sub::new("tree", Syntax::new(&[CARGO_TREE, CARGO_GLOBAL], CARGO_ALL))
        .operands(Operands::AtMost(0))
        .after(After::Nothing),
    Sub::new(
        "metadata",
        Syntax::new(&[CARGO_METADATA, CARGO_GLOBAL], CARGO_ALL),
    )
    .operands(Operands::AtMost(0))
    .after(After::Nothing),
    Sub::new("version", Syntax::new(&[CARGO_GLOBAL], CARGO_ALL))
        .operands(Operands::AtMost(0))
        .after(After::Nothing),
];

fn cargo(args: &[String]) -> Result<(), Miss> {
    if let Some(toolchain) = args.first().filter(|a| a.starts_with('+')) {
        return Err(Miss::new(toolchain.clone()).because("a toolchain override"));
    }
    let global = scan::read(&CARGO_GLOBAL_SYNTAX, args)?;
    target_triples(&global)?;
    let rest = args.get(global.stop..).unwrap_or_default();
    let Some((name, rest)) = rest.split_first() else {
        return Ok(());
    };
    let sub = find(CARGO_SUBS, name).ok_or_else(|| Miss::new(name.clone()))?;
    let read = check(sub, rest).map_err(|m| m.prefixed(name))?;
    target_triples(&read).map_err(|m| m.prefixed(name))
}

/// `--target` names a triple (`x86_64-unknown-linux-gnu`) or `all`, never a spec file.
fn target_triples(read: &Read<'_>) -> Result<(), Miss> {
    for (name, value) in &read.options {
        if *name == "target"
            && let Some(value) = value
            && !value
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            return Err(Miss::new(format!("--target {value}")).because(
                "a target that is not a plain triple may name a spec with its own linker",
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// find

/// Expression primaries that take no argument. Not here: `-delete`, `-exec`, `-execdir`,
/// `-ok`, `-okdir`, `-fls`, `-fprint`, `-fprint0`, `-fprintf`, `-files0-from`, `-follow`.
pub(super) const FIND_FLAGS: Table = "-depth -d -mount -xdev -noleaf -ignore_readdir_race \
    -noignore_readdir_race -daystart -warn -nowarn -help --help -version --version -empty \
    -executable -false -true -nogroup -nouser -readable -writable -print -print0 -ls -prune \
    -quit -not -a -and -o -or , ! ( )";
/// Expression primaries that take one argument.
pub(super) const FIND_WITH_ARG: Table = "-maxdepth -mindepth -regextype -amin -anewer -atime \
    -cmin -cnewer -ctime -fstype -gid -group -ilname -iname -inum -ipath -iregex -iwholename \
    -links -lname -mmin -mtime -name -newer -path -perm -regex -samefile -size -type -uid \
    -used -user -wholename -xtype -context -printf";
/// Options before the starting points. Not here: `-L` (follows links out of the tree), `-D`,
/// `-O`.
pub(super) const FIND_LEADING: Table = "-H -P";
/// Primaries find documents that are not allowed (for the tests).
#[cfg(test)]
pub(super) const FIND_DOC: Table = "-delete -exec -execdir -ok -okdir -fls -fprint -fprint0 \
    -fprintf -files0-from -follow -L -D -O";

fn find_expression(args: &[String]) -> Result<(), Miss> {
    let listed = |table: Table, arg: &str| table.split_ascii_whitespace().any(|t| t == arg);
    let mut args = args.iter().peekable();
    // Leading options: -H, -L, -P, -D <debug>, -O<level>.
    while let Some(arg) =
        args.next_if(|a| matches!(a.as_str(), "-H" | "-L" | "-P" | "-D") || a.starts_with("-O"))
    {
        if !listed(FIND_LEADING, arg) {
            return Err(Miss::new(arg.clone()));
        }
    }
    // Starting points, then the expression.
    while args
        .next_if(|a| !a.starts_with('-') && !matches!(a.as_str(), "(" | ")" | "!" | ","))
        .is_some()
    {}
    while let Some(arg) = args.next() {
        if listed(FIND_FLAGS, arg) {
            continue;
        }
        let newer_xy = arg
            .strip_prefix("-newer")
            .is_some_and(|xy| xy.len() == 2 && xy.bytes().all(|b| b"aBcmt".contains(&b)));
        if listed(FIND_WITH_ARG, arg) || newer_xy {
            // find takes the next argument as the value, whatever it looks like.
            if args.next().is_none() {
                return Err(Miss::new(arg.clone()).because("its value is missing"));
            }
            continue;
        }
        return Err(Miss::new(arg.clone()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// tar

/// Not here: `-T`/`--files-from` (a file of names that may hold options), `-I` and
/// `--use-compress-program`, `--to-command`, `--checkpoint-action`, `--info-script`, `-F`,
/// `--rsh-command`, `--rmt-command`, `-P`, `--remove-files`, `--overwrite`, `-h`, ... Letters
/// are the ones GNU tar and bsdtar read alike.
const TAR_ALLOWED: Table = "t list x extract get c create f= file= C= directory= v verbose z \
    gzip gunzip ungzip j bzip2 J xz zstd lzma lzip lzop Z compress uncompress a auto-compress \
    no-auto-compress k keep-old-files keep-newer-files skip-old-files O to-stdout p \
    preserve-permissions same-permissions no-same-owner no-same-permissions m touch \
    strip-components= exclude= exclude-vcs exclude-vcs-ignores exclude-caches \
    exclude-caches-under exclude-caches-all exclude-backups wildcards no-wildcards anchored \
    no-anchored ignore-case no-ignore-case wildcards-match-slash no-wildcards-match-slash \
    totals? sort= mtime= owner= group= numeric-owner mode= format= S sparse null no-null \
    one-file-system no-recursion recursion show-transformed-names checkpoint? warning= b= \
    blocking-factor= record-size= l check-links full-time utc quoting-style= restrict \
    force-local X= exclude-from= help usage version show-defaults ignore-failed-read";
const TAR_DOC: Table = "T= files-from= I= use-compress-program= compress-program= \
    to-command= checkpoint-action= info-script= new-volume-script= F= rsh-command= \
    rmt-command= index-file= P absolute-names remove-files U unlink-first recursive-unlink \
    overwrite overwrite-dir h dereference hard-dereference transform= xform= g= \
    listed-incremental= G incremental M multi-volume L= tape-length= w interactive \
    confirmation backup? suffix= r append u update A catenate concatenate d diff compare \
    delete W verify i ignore-zeros H= V= label= N= newer= after-date= newer-mtime= s \
    same-order preserve-order B read-full-records R block-number o old-archive portability \
    posix K= starting-file= occurrence? n seek no-seek add-file= verbatim-files-from \
    no-verbatim-files-from one-top-level? xattrs no-xattrs xattrs-include= xattrs-exclude= \
    acls no-acls selinux no-selinux atime-preserve? delay-directory-restore \
    no-delay-directory-restore hole-detection= sparse-version= pax-option= volno-file= \
    exclude-tag= exclude-tag-under= exclude-tag-all= exclude-ignore= \
    exclude-ignore-recursive= test-label ignore-command-error no-ignore-command-error \
    keep-directory-symlink unquote no-unquote level= same-owner preserve clamp-mtime \
    set-mtime-format= D";
pub(super) const TAR: Syntax = Syntax::new(&[TAR_ALLOWED], &[TAR_DOC]);

fn tar(args: &[String]) -> Result<(), Miss> {
    let mut rest = args;
    let mut options: Vec<(&'static str, Option<&str>)> = Vec::new();
    // Old style: a first argument without `-` is a cluster of letters whose values are the
    // arguments that follow, in order (`tar cfT a.tar list`).
    if let Some((letters, more)) = args.split_first().filter(|(a, _)| !a.starts_with('-')) {
        rest = more;
        for c in letters.chars() {
            let mut buf = [0; 4];
            let Some((listed, takes)) = TAR.allowed(c.encode_utf8(&mut buf)) else {
                return Err(Miss::new(format!("-{c}")).because(format!(
                    "in the old-style cluster `{}`",
                    craik_contracts::Truncated(letters)
                )));
            };
            match takes {
                Takes::Nothing => options.push((listed, None)),
                Takes::Value | Takes::ValueUnlessLast | Takes::Optional => {
                    let Some((value, more)) = rest
                        .split_first()
                        .filter(|(v, _)| !v.starts_with('-') || *v == "-")
                    else {
                        return Err(Miss::new(format!("-{c}")).because("its value is missing"));
                    };
                    rest = more;
                    options.push((listed, Some(value)));
                }
            }
        }
    }
    let read = scan::read(&TAR, rest)?;
    for (name, value) in options.iter().chain(&read.options) {
        if matches!(*name, "f" | "file") && value.is_some_and(|v| v.contains(':')) {
            return Err(
                Miss::new(format!("-f {}", value.unwrap_or_default())).because(
                    "an archive name with `:` is on a remote host, reached by a remote shell",
                ),
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// make

/// Not here: `-f`, `-C`, `-E`/`--eval`, `-I`, `-o`, `-W`, `-e`, `-t`, jobserver options; no
/// variable assignments (`SHELL=…`, `X!=cmd`, `MAKEFLAGS=…`) among the operands.
const MAKE_ALLOWED: Table = "j? jobs? k keep-going n just-print dry-run recon s silent quiet q \
    question B always-make w print-directory no-print-directory r no-builtin-rules R \
    no-builtin-variables i ignore-errors S no-keep-going stop O? output-sync? l? load-average? \
    max-load? d debug? trace p print-data-base v version h help warn-undefined-variables L \
    check-symlink-times shuffle?";
const MAKE_DOC: Table = "f= file= makefile= C= directory= E= eval= I= include-dir= o= old-file= \
    assume-old= W= what-if= new-file= assume-new= e environment-overrides t touch \
    jobserver-auth= jobserver-fds= jobserver-style= no-silent m";
pub(super) const MAKE: Syntax = Syntax::new(&[MAKE_ALLOWED], &[MAKE_DOC]);

fn make(args: &[String]) -> Result<(), Miss> {
    let read = scan::read(&MAKE, args)?;
    let after = read.after.unwrap_or_default();
    for operand in read
        .operands
        .iter()
        .copied()
        .chain(after.iter().map(String::as_str))
    {
        if operand.contains('=') {
            return Err(Miss::new(operand).because("a variable assignment"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// npm, pnpm, yarn

/// npm options are config keys; these few change only what is printed or which workspace runs.
/// Not here: `--script-shell`, `--prefix`, `--userconfig`, `--globalconfig`, `--node-options`,
/// `--call`, `-g`, ... Shorthands are whole arguments (`-s`), as nopt reads them.
const NPM_ALLOWED: Table = "s silent q quiet loglevel= color? no-color json w= workspace= \
    workspaces include-workspace-root if-present parseable long all depth= omit= include= \
    no-progress offline no-audit no-fund no-update-notifier v version";
const NPM_DOC: Table = "script-shell= prefix= userconfig= globalconfig= node-options= call= c= \
    package= shell= editor= browser= viewer= git= init-module= node-gyp= cache= registry= ca= \
    cafile= cert= key= https-proxy= proxy= noproxy= scope= tag= global g location= yes y force \
    f dry-run before= foreground-scripts ignore-scripts install-links install-strategy= \
    legacy-peer-deps strict-peer-deps save S save-dev D save-exact E save-prod P \
    save-optional O save-peer B package-lock package-lock-only global-style link bin-links \
    audit fund update-notifier engine-strict os= cpu= libc= sign-git-tag sign-git-commit \
    git-tag-version commit-hooks message= m= preid= otp= auth-type= logs-dir= logs-max= \
    timing umask= unicode usage userconfig= workspaces-update which= heading= progress C= \
    H h help l d dd ddd";
pub(super) const NPM: Syntax = Syntax::new(&[NPM_ALLOWED], &[NPM_DOC]).whole_shorts();

/// `(commands, how many operands after the command)`. `test`/`start` take none (more would
/// be passed to the script); `run` takes the script's name. Not here: `exec`, `x`, `explore`,
/// `install`, `ci`, `help` (runs man or a browser), `version`, ...
const NPM_COMMANDS: &[(&str, Option<usize>)] = &[
    ("test t tst start", Some(0)),
    ("run run-script rum urn", Some(1)),
    ("ls list ll la explain why", None),
];

fn npm(args: &[String]) -> Result<(), Miss> {
    let read = scan::read(&NPM, args)?;
    if let Some(first) = read.after.and_then(<[String]>::first) {
        return Err(
            Miss::new(format!("-- {first}")).because("arguments after `--` go to the script")
        );
    }
    let Some((command, operands)) = read.operands.split_first() else {
        return Ok(());
    };
    let Some((_, limit)) = NPM_COMMANDS
        .iter()
        .find(|(names, _)| names.split_ascii_whitespace().any(|n| n == *command))
    else {
        return Err(Miss::new(*command));
    };
    match limit.and_then(|n| operands.get(n)) {
        Some(extra) => Err(Miss::new(format!("{command} {extra}"))
            .because("further operands are passed to the script")),
        None => Ok(()),
    }
}

/// pnpm and yarn: `test` (and pnpm's `run NAME`), nothing else, no options. (`yarn run NAME`
/// also runs binaries, `pnpm exec`/`dlx` and `yarn dlx` run packages.)
fn pnpm(args: &[String]) -> Result<(), Miss> {
    package_manager(args, &["test", "run"])
}

fn yarn(args: &[String]) -> Result<(), Miss> {
    package_manager(args, &["test"])
}

fn package_manager(args: &[String], commands: &[&str]) -> Result<(), Miss> {
    let Some((command, rest)) = args.split_first() else {
        return Ok(());
    };
    if !commands.contains(&command.as_str()) {
        return Err(Miss::new(command.clone()));
    }
    let operands = usize::from(command == "run");
    match rest
        .iter()
        .enumerate()
        .find(|(at, a)| *at >= operands || a.starts_with('-'))
    {
        Some((_, extra)) => Err(Miss::new(format!("{command} {extra}"))),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// pytest

/// Not here: `-p` (loads a plugin), `-c`/`--config-file`, `-o`/`--override-ini`, `--rootdir`,
/// `--confcutdir`, `--basetemp` (deleted and recreated), `--pdb`/`--pdbcls`/`--trace`,
/// `--junitxml`, `--log-file`, `--debug`, `-W`, `--pyargs`, xdist's `--tx`/`--rsyncdir`,
/// coverage options.
const PYTEST_ALLOWED: Table = "q quiet v verbose x exitfirst maxfail= k= m= tb= r= l \
    showlocals s capture= lf last-failed ff failed-first nf new-first sw stepwise sw-skip \
    stepwise-skip co collect-only durations= durations-min= strict-markers strict-config strict \
    no-header no-summary color= code-highlight= disable-warnings disable-pytest-warnings \
    runxfail doctest-modules doctest-glob= doctest-report= doctest-continue-on-failure ignore= \
    ignore-glob= deselect= continue-on-collection-errors import-mode= full-trace setup-show \
    setup-only setup-plan fixtures funcargs fixtures-per-test markers version V h help \
    cache-show? cache-clear log-level= log-cli-level= noconftest keep-duplicates \
    collect-in-virtualenv n= numprocesses= lfnf= last-failed-no-failures= show-capture= \
    verbosity= assert=";
const PYTEST_DOC: Table = "p= c= config-file= o= override-ini= rootdir= confcutdir= basetemp= \
    pdb pdbcls= trace junitxml= junit-xml= junit-prefix= log-file= log-file-level= \
    log-file-format= log-file-date-format= log-format= log-date-format= log-auto-indent= \
    log-disable= debug? pastebin= result-log= tx= rsyncdir= rsyncignore= dist= looponfail f \
    boxed forked max-worker-restart= cov? cov-report= cov-config= cov-append cov-fail-under= \
    cov-context= cov-branch no-cov pyargs W= pythonwarnings= inifile= trace-config \
    plugins= P";
pub(super) const PYTEST: Syntax = Syntax::new(&[PYTEST_ALLOWED], &[PYTEST_DOC]);

fn pytest(args: &[String]) -> Result<(), Miss> {
    scan::read(&PYTEST, args).map(|_| ())
}

// ---------------------------------------------------------------------------------------------
// rsync, zip, unzip, ssh, scp

/// Local copies only (a `host:path` operand runs a remote shell). Not here: `-e`/`--rsh`,
/// `--rsync-path`, `-M`, `--daemon`, `--config`, `--files-from`, `--*-from`, `-f`/`--filter`,
/// `-F`, `--password-file`, batch and log files, `--temp-dir`, the `--*-dest` options,
/// `--delete*`, `--remove-source-files`, `-L`/`-k`/`-K` (follow links).
const RSYNC_ALLOWED: Table = "a archive r recursive v verbose q quiet z compress c checksum l \
    links p perms t times o owner g group D devices specials n dry-run h human-readable H \
    hard-links u update i itemize-changes progress stats R relative x one-file-system m \
    prune-empty-dirs mkpath W whole-file S sparse P partial exclude= include= info= \
    ignore-existing existing size-only list-only no-motd safe-links 8 8-bit-output 0 from0 E \
    executability A acls X xattrs y fuzzy timeout= contimeout= 4 ipv4 6 ipv6";
const RSYNC_DOC: Table = "e= rsh= rsync-path= M= remote-option= daemon config= files-from= \
    exclude-from= include-from= f= filter= F password-file= write-batch= only-write-batch= \
    read-batch= log-file= log-file-format= T= temp-dir= backup-dir= b backup suffix= \
    compare-dest= copy-dest= link-dest= L copy-links k copy-dirlinks K keep-dirlinks \
    copy-unsafe-links delete delete-before delete-during delete-delay delete-after \
    delete-excluded remove-source-files chown= chmod= usermap= groupmap= port= sockopts= \
    blocking-io outbuf= address= B= block-size= checksum-choice= compress-choice= \
    compress-level= skip-compress= iconv= stop-after= stop-at= max-size= min-size= \
    max-delete= max-alloc= partial-dir= append append-verify inplace bwlimit= protocol= \
    debug= out-format= modify-window= fake-super super no-implied-dirs numeric-ids \
    open-noatime preallocate trust-sender copy-as= early-input= munge-links old-args \
    secluded-args s protect-args C cvs-exclude O omit-dir-times J omit-link-times N crtimes \
    U atimes I ignore-times Y";
pub(super) const RSYNC: Syntax = Syntax::new(&[RSYNC_ALLOWED], &[RSYNC_DOC]);

fn rsync(args: &[String]) -> Result<(), Miss> {
    let read = scan::read(&RSYNC, args)?;
    let after = read.after.unwrap_or_default();
    for operand in read
        .operands
        .iter()
        .copied()
        .chain(after.iter().map(String::as_str))
    {
        if operand.contains(':') {
            return Err(Miss::new(operand)
                .because("a remote path: rsync reaches it by running a remote shell"));
        }
    }
    Ok(())
}

/// zip reads multi-letter single-dash options (`-sp`, `-TT`), so each short option must stand
/// alone. Not here: `-T`/`--test` and `-TT`/`--unzip-command` (run unzip or a command), `-m`
/// (deletes the originals), `-@`, `-x`/`-i` lists, `-b`, `-O`, `-e`/`-P`, ...
const ZIP_ALLOWED: Table = "r q v j y D X u f recurse-paths quiet verbose junk-paths symlinks \
    no-dir-entries no-extra update freshen";
const ZIP_DOC: Table = "T test TT= unzip-command= m move d delete x= exclude= i= include= b= \
    temp-path= n= suffixes= t= from-date= tt= before-date= e encrypt P= password= O= \
    output-file= s= split-size= sp pause sb bell sv split-verbose sc split-check A adjust-sfx \
    F fix FF fixfix FS filesync @ names-stdin z archive-comment c entry-comments o \
    latest-time l to-crlf ll from-crlf L license h help h2 more-help k DOS-names g grow R \
    recurse-patterns nw no-wild ws wild-stop-dirs MM must-match la log-append lf= \
    logfile-path= li log-info dc display-counts db display-bytes dd display-dots ds= \
    dot-size= du display-usize dv display-volume dg display-globaldots Z= \
    compression-method= cd= current-directory=";
pub(super) const ZIP: Syntax = Syntax::new(&[ZIP_ALLOWED], &[ZIP_DOC])
    .numeric()
    .whole_shorts();

fn zip(args: &[String]) -> Result<(), Miss> {
    scan::read(&ZIP, args).map(|_| ())
}

/// Not here: `-Z` (zipinfo mode, another option language), `-:` and `-^` (unsafe names),
/// `-P`, `-I`/`-O`, ...
const UNZIP_ALLOWED: Table = "l t v q o n d= j p c u f z x";
const UNZIP_DOC: Table = "Z T a b B C D e F E I= O= K L M N s S U V W X Y : ^ 2 P= h";
pub(super) const UNZIP: Syntax = Syntax::new(&[UNZIP_ALLOWED], &[UNZIP_DOC]);

fn unzip(args: &[String]) -> Result<(), Miss> {
    scan::read(&UNZIP, args).map(|_| ())
}

/// One destination and no remote command. Not here: `-o`, `-F`, `-J`, `-W`, `-L`/`-R`/`-D`
/// (forwarding), `-A`/`-X`/`-Y`, `-E`, `-S`, `-O`, `-M`, `-s`, `-f`, `-i`, `-I`, `-w`, ...
const SSH_ALLOWED: Table = "4 6 q v T t n N C x a V G p= l=";
const SSH_DOC: Table = "A B= b= c= D= E= e= F= f g I= i= J= K k L= M m= O= o= P= Q= R= S= s \
    W= w= X Y y";
pub(super) const SSH: Syntax = Syntax::new(&[SSH_ALLOWED], &[SSH_DOC]);

fn ssh(args: &[String]) -> Result<(), Miss> {
    let read = scan::read(&SSH, args)?;
    let mut operands = read
        .operands
        .iter()
        .copied()
        .chain(read.after.unwrap_or_default().iter().map(String::as_str));
    match operands.nth(1) {
        Some(command) => Err(Miss::new(command).because("a command to run on the remote host")),
        None => Ok(()),
    }
}

/// Not here: `-S` (the program to connect with), `-o`, `-F`, `-J`, `-i`, `-c`, `-D`, `-X`, ...
const SCP_ALLOWED: Table = "r q v p C 4 6 B P= l=";
const SCP_DOC: Table = "3 A D= F= i= J= O o= S= s T X= c= R";
pub(super) const SCP: Syntax = Syntax::new(&[SCP_ALLOWED], &[SCP_DOC]);

fn scp(args: &[String]) -> Result<(), Miss> {
    let read = scan::read(&SCP, args)?;
    for operand in &read.operands {
        if let Some((host, _)) = operand.split_once(':')
            && host.rsplit('@').next().is_some_and(|h| h.starts_with('-'))
        {
            return Err(Miss::new(*operand).because("a host name ssh would read as an option"));
        }
    }
    if let Some(first) = read.after.and_then(<[String]>::first) {
        return Err(Miss::new(format!("-- {first}")));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Interpreters: a script named in the workspace runs; options before it must be listed. (Code
// flags such as `-c`/`-e` make the command a wrapper before this is asked.)

/// An interpreter's options before its script: flag letters only. `python -m pytest` is read
/// as pytest; any other module is unvetted.
fn interpreter(args: &[String], letters: &str, python: bool) -> Result<(), Miss> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        if arg == "-" || arg == "--" {
            return Err(Miss::new(arg.clone())
                .because("the program would come from standard input or the next argument"));
        }
        let Some(body) = arg.strip_prefix('-') else {
            // The script: what follows is its own arguments.
            return Ok(());
        };
        for (at, c) in body.char_indices() {
            if python && c == 'm' {
                let attached = body.get(at + 1..).unwrap_or_default();
                let (module, rest) = if attached.is_empty() {
                    (args.get(i).map(String::as_str), args.get(i + 1..))
                } else {
                    (Some(attached), args.get(i..))
                };
                return match module {
                    Some("pytest") => {
                        pytest(rest.unwrap_or_default()).map_err(|m| m.prefixed("-m pytest"))
                    }
                    Some(module) => Err(Miss::new(format!("-m {module}"))),
                    None => Err(Miss::new("-m").because("its value is missing")),
                };
            }
            if !letters.contains(c) {
                return Err(Miss::new(format!("-{c}")));
            }
        }
    }
    Err(Miss::new("").because("no script is named, so the program would come from standard input"))
}

fn python(args: &[String]) -> Result<(), Miss> {
    interpreter(args, "BuqsObvPEI", true)
}

fn shell(args: &[String]) -> Result<(), Miss> {
    interpreter(args, "xuvn", false)
}

fn perl(args: &[String]) -> Result<(), Miss> {
    interpreter(args, "wWX", false)
}

fn ruby(args: &[String]) -> Result<(), Miss> {
    interpreter(args, "wW", false)
}

fn no_options(args: &[String]) -> Result<(), Miss> {
    interpreter(args, "", false)
}

/// deno and bun: only their test runners (and deno's checkers), without options: `run`, `x`,
/// `eval`, `task`, `install`, a script or URL named directly, ... are unvetted.
fn deno(args: &[String]) -> Result<(), Miss> {
    subcommand_without_options(args, &["test", "check", "lint", "fmt"])
}

fn bun(args: &[String]) -> Result<(), Miss> {
    subcommand_without_options(args, &["test"])
}

fn subcommand_without_options(args: &[String], allowed: &[&str]) -> Result<(), Miss> {
    let Some((sub, rest)) = args.split_first() else {
        return Err(Miss::new("").because("no subcommand"));
    };
    if !allowed.contains(&sub.as_str()) {
        return Err(Miss::new(sub.clone()));
    }
    match rest.iter().find(|a| a.starts_with('-')) {
        Some(option) => Err(Miss::new(format!("{sub} {option}"))),
        None => Ok(()),
    }
}

/// sed's script is code (`e` runs a command, `w` writes a file): only printing, deleting or
/// quitting at line numbers is on the list (`sed -n 1,20p FILE`).
const SED_ALLOWED: Table = "n quiet silent E r regexp-extended s separate u unbuffered z \
    null-data posix";
const SED_DOC: Table = "e= expression= f= file= i? in-place? l= line-length= b binary \
    follow-symlinks sandbox debug c copy";
pub(super) const SED: Syntax = Syntax::new(&[SED_ALLOWED], &[SED_DOC]);

fn sed(args: &[String]) -> Result<(), Miss> {
    let read = scan::read(&SED, args)?;
    let after = read.after.unwrap_or_default();
    let mut operands = read
        .operands
        .iter()
        .copied()
        .chain(after.iter().map(String::as_str));
    match operands.next() {
        None => Err(Miss::new("").because("no script")),
        Some(script) if simple_sed_script(script) => Ok(()),
        Some(script) => Err(Miss::new(script).because(
            "only `N[,M]p`, `N[,M]d`, `N=` and `Nq` scripts are on the list; a sed script is code",
        )),
    }
}

/// `ADDR[,ADDR]p`, `ADDR[,ADDR]d`, `ADDR=`, `Nq`, `p`, `=`, with ADDR a line number.
fn simple_sed_script(script: &str) -> bool {
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(command) = script.chars().last() else {
        return false;
    };
    let address = script.get(..script.len() - 1).unwrap_or_default();
    let range_ok = match address.split_once(',') {
        Some((a, b)) => number(a) && number(b),
        None => address.is_empty() || number(address),
    };
    match command {
        'p' | 'd' | '=' => range_ok,
        'q' => address.is_empty() || number(address),
        _ => false,
    }
}

/// An awk program is code (`system()`, pipes to commands); none is on the list.
fn awk(_: &[String]) -> Result<(), Miss> {
    Err(Miss::new("").because("an awk program is code"))
}
