//! The system-call filter every confined process runs under (seccomp-bpf, via `seccompiler`).
//!
//! Why seccomp and not a network namespace: a network namespace leaves path unix sockets
//! (`/run/*.sock`, reached through the file system) open, and needs privilege or user
//! namespaces; a filter on `socket(2)` closes every family at once, as root or not.
//!
//! - **Commands** may create no socket at all (TCP, UDP, raw, netlink, packet, unix path or
//!   abstract): `socket` fails `EACCES`; `socketpair(AF_UNIX)` stays (pipes between a
//!   program's own processes).
//! - **Adapters** may create only TCP sockets (`AF_INET`/`AF_INET6`, `SOCK_STREAM`, protocol
//!   0 or TCP): they reach model APIs; name resolution goes over TCP (`RES_OPTIONS=use-vc`).
//! - Both: no set-id bit in any file mode (`chmod` family, `open`/`creat` with `O_CREAT`,
//!   `mkdir`, `mknod`; `openat2`, whose mode a filter cannot read, answers `ENOSYS`), no `io_uring` (it creates sockets and opens files beside the filter), no new
//!   namespaces (`unshare`, `setns`, namespace flags of `clone`; `clone3`, whose flags a
//!   filter cannot read, answers `ENOSYS` so libc falls back to `clone`), no `bpf`,
//!   `perf_event_open`, `userfaultfd`, kernel keyrings, module loading, `ptrace`,
//!   `process_vm_*`, mounts, `kexec`, `reboot`, `swapon`, `acct`, `personality` changes;
//!   `prlimit64`, `sched_set*`, `migrate_pages`, `move_pages`, `setpriority` and `ioprio_set`
//!   on any process but the caller's own.
//!
//! The filter also refuses any other system-call ABI on the same machine (the generated
//! program checks the architecture; on x86_64 every x32 call answers `ENOSYS`, see
//! [`x32_guard`]).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition,
    SeccompFilter, SeccompRule,
};

/// What the process may reach over the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// No socket of any family.
    None,
    /// TCP over IPv4/IPv6 only.
    Tcp,
}

const EACCES: u32 = libc::EACCES as u32;
const EPERM: u32 = libc::EPERM as u32;
const ENOSYS: u32 = libc::ENOSYS as u32;

/// `clone` flags that make a namespace.
const NAMESPACE_FLAGS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];

/// System calls refused outright (`EPERM`).
const REFUSED: &[i64] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_kexec_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_personality,
    libc::SYS_name_to_handle_at,
    libc::SYS_open_by_handle_at,
];

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

fn cond(arg: u8, op: Op, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, Len::Dword, op, value).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

fn to_u64(v: i32) -> u64 {
    u64::from(v.unsigned_abs())
}

/// When `socket(2)` is refused: for commands always; for adapters whenever the family is not
/// IPv4/IPv6, the type not a stream, or the protocol not the default or TCP. A filter has no
/// "masked not equal", so the non-stream types are enumerated: the type's low four bits hold
/// every type there is, so the list is complete.
fn socket_rules(network: Network) -> Result<Vec<SeccompRule>, String> {
    match network {
        Network::None => Ok(Vec::new()),
        Network::Tcp => {
            let mut rules = vec![
                rule(vec![
                    cond(0, Op::Ne, to_u64(libc::AF_INET))?,
                    cond(0, Op::Ne, to_u64(libc::AF_INET6))?,
                ])?,
                rule(vec![
                    cond(2, Op::Ne, 0)?,
                    cond(2, Op::Ne, to_u64(libc::IPPROTO_TCP))?,
                ])?,
            ];
            for kind in (0..16_u64).filter(|k| *k != to_u64(libc::SOCK_STREAM)) {
                rules.push(rule(vec![cond(1, Op::MaskedEq(0xf), kind)?])?);
            }
            Ok(rules)
        }
    }
}

/// `BPF_LD | BPF_W | BPF_ABS`, `BPF_JMP | BPF_JSET | BPF_K`, `BPF_RET | BPF_K`.
const LD_W_ABS: u16 = 0x20;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
/// `__X32_SYSCALL_BIT`.
const X32_BIT: u32 = 0x4000_0000;

/// On x86_64 the x32 ABI shares the architecture tag and marks its numbers with
/// `__X32_SYSCALL_BIT`: three instructions put before the first program answer every x32
/// call `ENOSYS` (no program Craik runs uses that ABI), so no filter needs a second copy of
/// its rules. The generated programs jump only forward and relative to themselves, so a
/// prefix leaves them intact.
fn x32_guard() -> Vec<craik_spawn::Insn> {
    if !cfg!(target_arch = "x86_64") {
        return Vec::new();
    }
    let insn = |code, jt, jf, k| craik_spawn::Insn { code, jt, jf, k };
    vec![
        // A = seccomp_data.nr
        insn(LD_W_ABS, 0, 0, 0),
        // if (A & X32_BIT) fall through to the return, else skip it
        insn(JSET_K, 0, 1, X32_BIT),
        insn(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | ENOSYS),
    ]
}

fn compile(map: Rules, errno: u32) -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    SeccompFilter::new(map, SeccompAction::Allow, SeccompAction::Errno(errno), arch)
        .map_err(|e| e.to_string())?
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// The calls that take a file mode: the index of that argument, and of the flags that say
/// whether the call creates (`open`, `openat`); a mode with the setuid or setgid bit is refused (a confined command never makes a set-id file, which would keep
/// its bit on the host's own view of the workspace).
fn mode_args() -> Vec<(i64, u8, Option<u8>)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1, None),
        (libc::SYS_fchmodat, 2, None),
        // fchmodat2 (Linux 6.6): the mode where fchmodat has it.
        (libc::SYS_fchmodat2, 2, None),
        (libc::SYS_openat, 3, Some(2)),
        (libc::SYS_mkdirat, 2, None),
        (libc::SYS_mknodat, 2, None),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1, None),
        (libc::SYS_open, 2, Some(1)),
        (libc::SYS_creat, 1, None),
        (libc::SYS_mkdir, 1, None),
        (libc::SYS_mknod, 1, None),
    ]);
    calls
}

/// The filters for a process with `network` access, compiled for this machine. Each refuses
/// with its own errno; installed together, the kernel applies all of them.
pub fn programs(network: Network) -> Result<Vec<BpfProgram>, String> {
    let mut sockets = Rules::new();
    sockets.insert(libc::SYS_socket, socket_rules(network)?);
    sockets.insert(
        libc::SYS_socketpair,
        vec![rule(vec![cond(0, Op::Ne, to_u64(libc::AF_UNIX))?])?],
    );
    let mut refused: Rules = REFUSED.iter().map(|c| (*c, Vec::new())).collect();
    refused.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|f| rule(vec![cond(0, Op::MaskedEq(to_u64(*f)), to_u64(*f))?]))
            .collect::<Result<_, _>>()?,
    );
    for (call, arg, flags) in mode_args() {
        // The mode only counts when the call creates: for `open`/`openat` when O_CREAT or
        // O_TMPFILE is set (otherwise the register holds whatever the caller left there).
        let creating: Vec<Option<(u8, u64)>> = match flags {
            None => vec![None],
            Some(f) => vec![
                Some((f, to_u64(libc::O_CREAT))),
                Some((f, to_u64(libc::O_TMPFILE))),
            ],
        };
        let mut rules = Vec::new();
        for bit in [libc::S_ISUID, libc::S_ISGID] {
            for create in &creating {
                let mut conditions = vec![cond(arg, Op::MaskedEq(u64::from(bit)), u64::from(bit))?];
                if let Some((f, flag)) = create {
                    conditions.push(cond(*f, Op::MaskedEq(*flag), *flag)?);
                }
                rules.push(rule(conditions)?);
            }
        }
        refused.insert(call, rules);
    }
    // Resource limits, scheduling, I/O priority and memory placement of any process but the
    // caller's own: a confined process could otherwise lower Craik's RLIMIT_CPU/FSIZE/AS to
    // kill it mid-write, or raise its RLIMIT_CORE to dump the signing key (found by outside
    // testing; same-uid permission checks allow all of these).
    for (call, pid_arg) in [
        (libc::SYS_prlimit64, 0),
        (libc::SYS_sched_setaffinity, 0),
        (libc::SYS_sched_setscheduler, 0),
        (libc::SYS_sched_setparam, 0),
        (libc::SYS_sched_setattr, 0),
        (libc::SYS_migrate_pages, 0),
        (libc::SYS_move_pages, 0),
        (libc::SYS_ioprio_set, 1),
        (libc::SYS_setpriority, 1),
    ] {
        refused.insert(call, vec![rule(vec![cond(pid_arg, Op::Ne, 0)?])?]);
    }
    // `setpriority`/`ioprio_set` with `who == 0` mean the caller only for a process target:
    // a process group or user target (who 0 = the caller's group or uid, Craik included) is
    // refused too.
    if let Some(rules) = refused.get_mut(&libc::SYS_setpriority) {
        rules.push(rule(vec![cond(0, Op::Ne, u64::from(libc::PRIO_PROCESS))?])?);
    }
    if let Some(rules) = refused.get_mut(&libc::SYS_ioprio_set) {
        // IOPRIO_WHO_PROCESS = 1.
        rules.push(rule(vec![cond(0, Op::Ne, 1)?])?);
    }
    let mut clone3 = Rules::new();
    clone3.insert(libc::SYS_clone3, Vec::new());
    // `openat2` carries its mode in a struct no filter can read: refused as unknown, so
    // libc and programs fall back to `openat`, whose mode is checked.
    clone3.insert(libc::SYS_openat2, Vec::new());
    Ok(vec![
        compile(sockets, EACCES)?,
        compile(refused, EPERM)?,
        compile(clone3, ENOSYS)?,
    ])
}

/// The filters for `network`, compiled once per process and kept as the instructions the
/// child installs ([`craik_spawn::Insn`]).
pub(super) fn filters(network: Network) -> Result<&'static [Vec<craik_spawn::Insn>], String> {
    type Compiled = Result<Vec<Vec<craik_spawn::Insn>>, String>;
    static NONE: OnceLock<Compiled> = OnceLock::new();
    static TCP: OnceLock<Compiled> = OnceLock::new();
    let cell = match network {
        Network::None => &NONE,
        Network::Tcp => &TCP,
    };
    cell.get_or_init(|| {
        let mut guard = Some(x32_guard());
        Ok(programs(network)?
            .into_iter()
            .map(|program| {
                let compiled = program.iter().map(|i| craik_spawn::Insn {
                    code: i.code,
                    jt: i.jt,
                    jf: i.jf,
                    k: i.k,
                });
                guard
                    .take()
                    .unwrap_or_default()
                    .into_iter()
                    .chain(compiled)
                    .collect()
            })
            .collect())
    })
    .as_deref()
    .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_filters_compile_for_this_machine() {
        for network in [Network::None, Network::Tcp] {
            let programs = programs(network).unwrap();
            assert_eq!(programs.len(), 3);
            assert!(programs.iter().all(|p| !p.is_empty()));
            let installed = filters(network).unwrap();
            assert_eq!(installed.len(), 3);
            let first = installed.first().unwrap();
            if cfg!(target_arch = "x86_64") {
                assert_eq!(first.get(..3).unwrap(), x32_guard().as_slice());
                assert_eq!(first.len(), programs.first().unwrap().len() + 3);
            }
        }
    }
}
