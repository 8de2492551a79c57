//! The system-call filter every confined process runs under (seccomp-bpf): a rule table
//! ([`table`]) compiled here into one classic-BPF program.
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
//!   `process_vm_*`, `pidfd_getfd`, `kcmp`, mounts, `kexec`, `reboot`, `swapon`, `acct`, `personality` changes,
//!   System V IPC and POSIX message queues, `inotify` watches;
//!   `prlimit64`, `sched_set*`, `migrate_pages`, `move_pages`, `setpriority` and `ioprio_set`
//!   on any process but the caller's own.
//!
//! The filter also refuses any other system-call ABI on the same machine: a call made under
//! another architecture tag kills the process; on x86_64 every x32 call answers `ENOSYS`.
//!
//! Why a compiler of its own (about 150 lines) instead of a filter library: installing a
//! filter costs the kernel time in proportion to its length (it is checked and compiled to
//! machine code for every process), and every system call the program makes walks it. A
//! general filter generator (`seccompiler`, used before) emitted three programs of 530
//! instructions in all, 64-bit comparisons for arguments the kernel reads as 32-bit
//! integers, and a separate program per errno; this one emits a single program of about a
//! quarter of that, comparing the low 32 bits the kernel actually reads. Its correctness is
//! not assumed: the tests run every program through a BPF interpreter against the rule table
//! evaluated directly, for every system-call number and a generated set of arguments.

use std::sync::OnceLock;

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
    // Another process's descriptors: Craik's, or those of the init of the command's PID
    // namespace, which shares Craik's memory (`craik_spawn`; issue 30 item 5).
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
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
    libc::SYS_mount_setattr,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_fanotify_init,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    // System V IPC and POSIX message queues: the host's segments, semaphores and queues are
    // not reachable, and nothing is left behind (found by outside testing: a command left a
    // 256 MiB segment). Refused rather than given a private IPC namespace per process, which
    // cost 80 µs of every spawn (issue 18 item 9). POSIX shared memory and semaphores are
    // files under `/dev/shm`, which no sandbox grants.
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
    // Landlock does not govern inotify: a command watched the names appear in Craik's home
    // and saw when the key was read (found by outside testing).
    libc::SYS_inotify_add_watch,
];

/// A test on the low 32 bits of one argument (every argument the table tests is one the
/// kernel reads as a 32-bit integer: `int`, `unsigned int`, `umode_t`, `pid_t`, or flags that
/// all lie in the low word, as `clone`'s namespace flags do; so the low word is exactly what
/// the kernel acts on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// `arg & mask != 0`.
    Set(u8, u32),
    /// `arg & mask == value`.
    MaskedEq(u8, u32, u32),
    /// `arg & mask != value`.
    MaskedNe(u8, u32, u32),
}

impl Test {
    fn ne(arg: u8, value: u32) -> Self {
        Self::MaskedNe(arg, u32::MAX, value)
    }

    fn holds(self, args: &[u64; 6]) -> bool {
        let low = |arg: u8| {
            args.get(usize::from(arg))
                .map_or(0, |a| (a & u64::from(u32::MAX)) as u32)
        };
        match self {
            Self::Set(arg, mask) => low(arg) & mask != 0,
            Self::MaskedEq(arg, mask, value) => low(arg) & mask == value,
            Self::MaskedNe(arg, mask, value) => low(arg) & mask != value,
        }
    }

    const fn arg(self) -> u8 {
        match self {
            Self::Set(arg, _) | Self::MaskedEq(arg, _, _) | Self::MaskedNe(arg, _, _) => arg,
        }
    }
}

/// One refusal of a call: `errno` when every test holds (no test: always).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The errno the call answers.
    pub errno: u32,
    /// Tests that must all hold.
    pub when: Vec<Test>,
}

/// The rule table: per system call, the refusals tried in order (the first that holds
/// answers); a call not in the table is allowed.
pub type Table = Vec<(i64, Vec<Refusal>)>;

fn always(errno: u32) -> Vec<Refusal> {
    vec![Refusal {
        errno,
        when: Vec::new(),
    }]
}

fn refuse(errno: u32, when: Vec<Test>) -> Refusal {
    Refusal { errno, when }
}

fn low(v: i32) -> u32 {
    v.cast_unsigned()
}

/// When `socket(2)` is refused: for commands always; for adapters whenever the family is not
/// IPv4/IPv6, the type (its low four bits hold every type there is) not a stream, or the
/// protocol not the default or TCP.
fn socket_refusals(network: Network) -> Vec<Refusal> {
    match network {
        Network::None => always(EACCES),
        Network::Tcp => vec![
            refuse(
                EACCES,
                vec![
                    Test::ne(0, low(libc::AF_INET)),
                    Test::ne(0, low(libc::AF_INET6)),
                ],
            ),
            refuse(EACCES, vec![Test::MaskedNe(1, 0xf, low(libc::SOCK_STREAM))]),
            refuse(
                EACCES,
                vec![Test::ne(2, 0), Test::ne(2, low(libc::IPPROTO_TCP))],
            ),
        ],
    }
}

/// The calls that take a file mode: the index of that argument, and of the flags that say
/// whether the call creates (`open`, `openat`); a mode with the setuid or setgid bit is
/// refused (a confined command never makes a set-id file, which would keep its bit on the
/// host's own view of the workspace).
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

/// The rule table for a process with `network` access (see the module documentation).
pub fn table(network: Network) -> Table {
    let mut table: Table = Vec::new();
    table.push((libc::SYS_socket, socket_refusals(network)));
    table.push((
        libc::SYS_socketpair,
        vec![refuse(EACCES, vec![Test::ne(0, low(libc::AF_UNIX))])],
    ));
    table.extend(REFUSED.iter().map(|call| (*call, always(EPERM))));
    let namespaces = NAMESPACE_FLAGS.iter().fold(0_u32, |m, f| m | low(*f));
    table.push((
        libc::SYS_clone,
        vec![refuse(EPERM, vec![Test::Set(0, namespaces)])],
    ));
    let set_id: u32 = libc::S_ISUID | libc::S_ISGID;
    for (call, mode, flags) in mode_args() {
        // The mode only counts when the call creates: for `open`/`openat` when O_CREAT or
        // O_TMPFILE is set (otherwise the register holds whatever the caller left there).
        let refusals = match flags {
            None => vec![refuse(EPERM, vec![Test::Set(mode, set_id)])],
            Some(f) => vec![
                refuse(
                    EPERM,
                    vec![Test::Set(mode, set_id), Test::Set(f, low(libc::O_CREAT))],
                ),
                refuse(
                    EPERM,
                    vec![
                        Test::Set(mode, set_id),
                        Test::MaskedEq(f, low(libc::O_TMPFILE), low(libc::O_TMPFILE)),
                    ],
                ),
            ],
        };
        table.push((call, refusals));
    }
    // Resource limits, scheduling, I/O priority and memory placement of any process but the
    // caller's own: a confined process could otherwise lower Craik's RLIMIT_CPU/FSIZE/AS to
    // kill it mid-write, or raise its RLIMIT_CORE to dump the signing key (found by outside
    // testing; same-uid permission checks allow all of these).
    for (call, pid) in [
        (libc::SYS_prlimit64, 0),
        (libc::SYS_sched_setaffinity, 0),
        (libc::SYS_sched_setscheduler, 0),
        (libc::SYS_sched_setparam, 0),
        (libc::SYS_sched_setattr, 0),
        (libc::SYS_migrate_pages, 0),
        (libc::SYS_move_pages, 0),
    ] {
        table.push((call, vec![refuse(EPERM, vec![Test::ne(pid, 0)])]));
    }
    // `setpriority`/`ioprio_set` with `who == 0` mean the caller only for a process target:
    // a process group or user target (who 0 = the caller's group or uid, Craik included) is
    // refused too. (IOPRIO_WHO_PROCESS = 1.)
    for (call, process) in [
        (libc::SYS_setpriority, low(libc::PRIO_PROCESS.cast_signed())),
        (libc::SYS_ioprio_set, 1),
    ] {
        table.push((
            call,
            vec![
                refuse(EPERM, vec![Test::ne(1, 0)]),
                refuse(EPERM, vec![Test::ne(0, process)]),
            ],
        ));
    }
    // `clone3` carries its flags, and `openat2` its mode, in structs no filter can read:
    // refused as unknown, so libc and programs fall back to `clone` and `openat`, which are
    // checked.
    table.push((libc::SYS_clone3, always(ENOSYS)));
    table.push((libc::SYS_openat2, always(ENOSYS)));
    table
}

/// What the table answers for one call (the reference the compiled program must agree with).
pub fn decide(table: &Table, nr: i64, args: &[u64; 6]) -> Option<u32> {
    let (_, refusals) = table.iter().find(|(call, _)| *call == nr)?;
    refusals
        .iter()
        .find(|r| r.when.iter().all(|t| t.holds(args)))
        .map(|r| r.errno)
}

// Classic BPF opcodes (`linux/filter.h`).
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

/// `__X32_SYSCALL_BIT`.
const X32_BIT: u32 = 0x4000_0000;

/// `struct seccomp_data`: `nr` at 0, `arch` at 4, `args[6]` (u64 each) from 16.
const NR: u32 = 0;
const ARCH: u32 = 4;

/// The offset of the low 32 bits of argument `i`.
fn arg_low(i: u8) -> u32 {
    let base = 16 + 8 * u32::from(i);
    if cfg!(target_endian = "little") {
        base
    } else {
        base + 4
    }
}

/// The `AUDIT_ARCH_*` tag of this machine's native system-call ABI.
fn audit_arch() -> Result<u32, String> {
    // EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
    if cfg!(target_arch = "x86_64") {
        Ok(0xC000_003E)
    } else if cfg!(target_arch = "aarch64") {
        Ok(0xC000_00B7)
    } else if cfg!(target_arch = "riscv64") {
        Ok(0xC000_00F3)
    } else {
        Err(format!(
            "no system-call filter for this architecture ({})",
            std::env::consts::ARCH
        ))
    }
}

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> craik_spawn::Insn {
    craik_spawn::Insn { code, jt, jf, k }
}

/// A jump distance, refused when it does not fit (the compiler never emits a jump it cannot
/// express).
fn hop(n: usize) -> Result<u8, String> {
    u8::try_from(n).map_err(|_| format!("seccomp: a jump of {n} instructions"))
}

/// Compiles `table` into one program. Layout:
///
/// ```text
///   A = arch; if A != native: kill the process
///   A = nr;   if A & X32_BIT: return ENOSYS
///   for each call:  if A != nr: skip its block
///                   block: for each refusal: test each argument, on a miss go to the next
///                          refusal; all held: return its errno
///                          return ALLOW        (A was overwritten by the argument loads)
///   return ALLOW
/// ```
///
/// A call refused with no test is a single `jeq` to a shared return at the end.
pub fn compile(table: &Table) -> Result<Vec<craik_spawn::Insn>, String> {
    let ret = |v: u32| insn(RET_K, 0, 0, v);
    let errno = |e: u32| libc::SECCOMP_RET_ERRNO | (e & libc::SECCOMP_RET_DATA);
    // Shared returns for calls refused outright, by errno, after the dispatch.
    let mut shared: Vec<u32> = Vec::new();
    for (_, refusals) in table {
        if let [only] = refusals.as_slice()
            && only.when.is_empty()
            && !shared.contains(&only.errno)
        {
            shared.push(only.errno);
        }
    }
    let mut body: Vec<craik_spawn::Insn> = Vec::new();
    // Jumps to shared returns, patched once the body's length is known: (index, errno).
    let mut to_shared: Vec<(usize, u32)> = Vec::new();
    for (nr, refusals) in table {
        let nr = u32::try_from(*nr).map_err(|_| format!("seccomp: system call number {nr}"))?;
        if let [only] = refusals.as_slice()
            && only.when.is_empty()
        {
            to_shared.push((body.len(), only.errno));
            body.push(insn(JEQ_K, 0, 0, nr));
            continue;
        }
        let mut block = Vec::new();
        for refusal in refusals {
            // Each test is a load and one or two instructions; a miss jumps past the rest of
            // this refusal (to the next one, or to the block's final ALLOW).
            let mut tests: Vec<Vec<craik_spawn::Insn>> = Vec::new();
            for test in &refusal.when {
                let mut t = vec![insn(LD_W_ABS, 0, 0, arg_low(test.arg()))];
                match *test {
                    // Patched below: jf / jt = distance to the refusal's end.
                    Test::Set(_, mask) => t.push(insn(JSET_K, 0, 0, mask)),
                    Test::MaskedEq(_, mask, value) | Test::MaskedNe(_, mask, value) => {
                        if mask != u32::MAX {
                            t.push(insn(AND_K, 0, 0, mask));
                        }
                        t.push(insn(JEQ_K, 0, 0, value));
                    }
                }
                tests.push(t);
            }
            let total: usize = tests.iter().map(Vec::len).sum::<usize>() + 1;
            let mut emitted = 0;
            for (test, mut t) in refusal.when.iter().zip(tests) {
                emitted += t.len();
                // From the jump (the last instruction of this test) to the instruction after
                // the refusal's return.
                let miss = hop(total - emitted)?;
                if let Some(jump) = t.last_mut() {
                    match test {
                        Test::Set(..) | Test::MaskedEq(..) => jump.jf = miss,
                        Test::MaskedNe(..) => jump.jt = miss,
                    }
                }
                block.extend(t);
            }
            block.push(ret(errno(refusal.errno)));
        }
        block.push(ret(libc::SECCOMP_RET_ALLOW));
        body.push(insn(JEQ_K, 0, hop(block.len())?, nr));
        body.extend(block);
    }
    body.push(ret(libc::SECCOMP_RET_ALLOW));
    let start = body.len();
    for e in &shared {
        body.push(ret(errno(*e)));
    }
    for (at, e) in to_shared {
        let slot = shared
            .iter()
            .position(|s| *s == e)
            .ok_or("seccomp: a shared return is missing")?;
        let distance = hop(start + slot - at - 1)?;
        if let Some(jump) = body.get_mut(at) {
            jump.jt = distance;
        }
    }
    let mut program = vec![
        insn(LD_W_ABS, 0, 0, ARCH),
        insn(JEQ_K, 1, 0, audit_arch()?),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
        insn(LD_W_ABS, 0, 0, NR),
    ];
    if cfg!(target_arch = "x86_64") {
        program.push(insn(JSET_K, 0, 1, X32_BIT));
        program.push(ret(errno(ENOSYS)));
    }
    program.extend(body);
    if program.len() > usize::from(u16::MAX) {
        return Err("seccomp: the program is too long".into());
    }
    Ok(program)
}

/// The filter for `network`, compiled once per process and kept as the instructions the
/// child installs ([`craik_spawn::Insn`]): one program.
pub(super) fn filters(network: Network) -> Result<&'static [Vec<craik_spawn::Insn>], String> {
    type Compiled = Result<Vec<Vec<craik_spawn::Insn>>, String>;
    static NONE: OnceLock<Compiled> = OnceLock::new();
    static TCP: OnceLock<Compiled> = OnceLock::new();
    let cell = match network {
        Network::None => &NONE,
        Network::Tcp => &TCP,
    };
    cell.get_or_init(|| Ok(vec![compile(&table(network))?]))
        .as_deref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests;
