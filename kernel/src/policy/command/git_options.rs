//! git's documented options of the subcommands that reach other repositories or write
//! archives — `clone`, `fetch`, `pull`, `push`, `ls-remote`, `archive`, `submodule` — as the
//! installed git states them: generated, not written by hand. The long names come from
//! `git SUB --git-completion-helper-all` and `git SUB -h`, the short letters (and the long
//! option each stands for) from `git SUB -h`; `submodule`, a script, from its usage lines.
//! The test `issue_30_git_option_tables_match_the_installed_git` reruns that extraction on
//! the machine's git and fails on any difference, printing the table to paste here.
//!
//! These subcommands are on no allow-list ([`super::tools`]): every use is unvetted (a human
//! approves it). The tables decide two things: which short letter spells an exec option of
//! that subcommand (`clone -u` is `--upload-pack`, `archive -o` is `--output`; `push -o` is
//! not), so it is denied as its long form is ([`super::hatches`]); and how an abbreviation
//! resolves (every name here is known to the abbreviation reader).
//!
//! Generated with git 2.47.3.

use super::scan::Table;

/// One subcommand's documented options.
pub(super) struct GitOptions {
    pub(super) sub: &'static str,
    /// Long names, a value-taking one as `name=`.
    pub(super) long: Table,
    /// `letter=long-name` for every short option.
    pub(super) short: &'static str,
}

pub(super) const CLONE: GitOptions = GitOptions {
    sub: "clone",
    long: "also-filter-submodules bare branch= bundle-uri= checkout config= depth= dissociate filter= hardlinks ipv4 ipv6 jobs= local mirror naked no-also-filter-submodules no-bare no-branch no-bundle-uri no-checkout no-config no-depth no-dissociate no-filter no-hardlinks no-jobs no-local no-mirror no-naked no-origin no-progress no-quiet no-recurse-submodules no-recursive no-ref-format no-reference no-reference-if-able no-reject-shallow no-remote-submodules no-separate-git-dir no-server-option no-shallow-exclude no-shallow-since no-shallow-submodules no-shared no-single-branch no-sparse no-tags no-template no-upload-pack no-verbose origin= progress quiet recurse-submodules= recursive= ref-format= reference= reference-if-able= reject-shallow remote-submodules separate-git-dir= server-option= shallow-exclude= shallow-since= shallow-submodules shared single-branch sparse tags template= upload-pack= verbose",
    short: "4=ipv4 6=ipv6 b=branch c=config j=jobs l=local n=no-checkout o=origin q=quiet s=shared u=upload-pack v=verbose",
};
pub(super) const FETCH: GitOptions = GitOptions {
    sub: "fetch",
    long: "all= append atomic auto auto-gc auto-maintenance deepen= depth= dry-run filter= force ipv4 ipv6 jobs= keep multiple= negotiate-only negotiation-tip= no-all no-append no-atomic no-auto-gc no-auto-maintenance no-deepen no-depth no-dry-run no-filter no-force no-jobs no-keep no-multiple no-negotiate-only no-negotiation-tip no-porcelain no-prefetch no-progress no-prune no-prune-tags no-quiet no-recurse-submodules no-recurse-submodules-default no-server-option no-set-upstream no-shallow-exclude no-shallow-since no-show-forced-updates no-stdin no-submodule-prefix no-tags no-update-head-ok no-update-shallow no-upload-pack no-verbose no-write-commit-graph no-write-fetch-head porcelain prefetch progress prune prune-tags quiet recurse-submodules= recurse-submodules-default= refetch refmap= server-option= set-upstream shallow-exclude= shallow-since= show-forced-updates stdin submodule-prefix= tags unshallow update-head-ok update-shallow upload-pack= verbose write-commit-graph write-fetch-head",
    short: "4=ipv4 6=ipv6 P=prune-tags a=append f=force j=jobs k=keep m=multiple o=server-option p=prune q=quiet t=tags u=update-head-ok v=verbose",
};
pub(super) const PULL: GitOptions = GitOptions {
    sub: "pull",
    long: "all allow-unrelated-histories append autostash cleanup= commit deepen= depth= dry-run edit ff ff-only force gpg-sign= ipv4 ipv6 jobs= keep log= negotiation-tip= no-all no-allow-unrelated-histories no-append no-autostash no-cleanup no-commit no-deepen no-depth no-dry-run no-edit no-ff no-force no-gpg-sign no-ipv4 no-ipv6 no-jobs no-keep no-log no-negotiation-tip no-progress no-prune no-quiet no-rebase no-recurse-submodules no-server-option no-set-upstream no-shallow-exclude no-shallow-since no-show-forced-updates no-signoff no-squash no-stat no-strategy no-strategy-option no-summary no-tags no-update-shallow no-upload-pack no-verbose no-verify no-verify-signatures progress prune quiet rebase= recurse-submodules= refmap= server-option= set-upstream shallow-exclude= shallow-since= show-forced-updates signoff= squash stat strategy= strategy-option= summary tags unshallow update-shallow upload-pack= verbose verify verify-signatures",
    short: "4=ipv4 6=ipv6 S=gpg-sign X=strategy-option a=append f=force j=jobs k=keep o=server-option p=prune q=quiet r=rebase s=strategy t=tags v=verbose",
};
pub(super) const PUSH: GitOptions = GitOptions {
    sub: "push",
    long: "all atomic branches delete dry-run exec= follow-tags force force-if-includes force-with-lease= ipv4 ipv6 mirror no-all no-atomic no-branches no-delete no-dry-run no-exec no-follow-tags no-force no-force-if-includes no-force-with-lease no-mirror no-porcelain no-progress no-prune no-push-option no-quiet no-receive-pack no-recurse-submodules no-repo no-set-upstream no-signed no-tags no-thin no-verbose no-verify porcelain progress prune push-option= quiet receive-pack= recurse-submodules= repo= set-upstream signed= tags thin verbose verify",
    short: "4=ipv4 6=ipv6 d=delete f=force n=dry-run o=push-option q=quiet u=set-upstream v=verbose",
};
pub(super) const LS_REMOTE: GitOptions = GitOptions {
    sub: "ls-remote",
    long: "branches exec= exit-code get-url heads no-branches no-exec no-exit-code no-get-url no-heads no-quiet no-refs no-server-option no-sort no-symref no-tags no-upload-pack quiet refs server-option= sort= symref= tags upload-pack=",
    short: "b=branches o=server-option q=quiet t=tags",
};
pub(super) const ARCHIVE: GitOptions = GitOptions {
    sub: "archive",
    long: "add-file= add-virtual-file= exec= format= list mtime= no-exec no-output no-remote output= prefix= remote= verbose worktree-attributes",
    short: "l=list o=output v=verbose",
};
pub(super) const SUBMODULE: GitOptions = GitOptions {
    sub: "submodule",
    long: "all branch= cached checkout default= files filter= force init merge name= no-fetch quiet rebase recommend-shallow recursive= reference= remote single-branch summary-limit=",
    short: "",
};

pub(super) const GIT_OPTIONS: &[GitOptions] =
    &[CLONE, FETCH, PULL, PUSH, LS_REMOTE, ARCHIVE, SUBMODULE];
