//! The compiled filter agrees with its rule table: every program runs through a classic-BPF
//! interpreter (the subset the compiler emits, anything else fails the test) for every
//! system-call number and a generated set of arguments.

use super::*;

/// What the kernel would answer: the filter's return value.
fn run(program: &[craik_spawn::Insn], arch: u32, nr: u32, args: &[u64; 6]) -> u32 {
    let mut data = Vec::with_capacity(64);
    data.extend(nr.to_ne_bytes());
    data.extend(arch.to_ne_bytes());
    data.extend(0_u64.to_ne_bytes());
    for a in args {
        data.extend(a.to_ne_bytes());
    }
    let mut acc: u32 = 0;
    let mut pc = 0_usize;
    for _ in 0..=program.len() {
        let i = program[pc];
        pc += 1;
        match i.code {
            LD_W_ABS => {
                let at = i.k as usize;
                acc = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
            }
            AND_K => acc &= i.k,
            JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
            JSET_K => pc += usize::from(if acc & i.k != 0 { i.jt } else { i.jf }),
            RET_K => return i.k,
            other => panic!("opcode {other:#x} the compiler must not emit"),
        }
    }
    panic!("the program ran past its end or looped")
}

fn expected(table: &Table, nr: u32, args: &[u64; 6]) -> u32 {
    match decide(table, i64::from(nr), args) {
        Some(errno) => libc::SECCOMP_RET_ERRNO | errno,
        None => libc::SECCOMP_RET_ALLOW,
    }
}

/// Values worth trying in an argument: every bit the table tests, alone and together, with
/// and without high bits, and the constants it compares against.
fn interesting(table: &Table) -> Vec<u64> {
    let mut values: Vec<u64> = vec![0, 1, 2, 6, 10, u64::from(u32::MAX), u64::MAX, 1 << 32];
    for (_, refusals) in table {
        for r in refusals {
            for t in &r.when {
                let (mask, value) = match *t {
                    Test::Set(_, m) => (m, m),
                    Test::MaskedEq(_, m, v) | Test::MaskedNe(_, m, v) => (m, v),
                };
                for v in [mask, value, mask & !value, value | 0x8000_0000] {
                    values.push(u64::from(v));
                    values.push(u64::from(v) | (0xdead_u64 << 32));
                }
                for bit in 0..32 {
                    if mask & (1 << bit) != 0 {
                        values.push(1 << bit);
                    }
                }
            }
        }
    }
    values.sort_unstable();
    values.dedup();
    values
}

#[test]
fn the_program_agrees_with_its_table_for_every_call_and_argument() {
    let arch = audit_arch().unwrap();
    for network in [Network::None, Network::Tcp] {
        let table = table(network);
        let program = compile(&table).unwrap();
        let values = interesting(&table);
        let mut checked = 0_u64;
        for nr in 0..1024_u32 {
            let tested: Vec<u8> = decide_args(&table, nr);
            // Each tested argument over every interesting value, the others over a few.
            let mut cases: Vec<[u64; 6]> = vec![[0; 6], [u64::MAX; 6]];
            for arg in &tested {
                for v in &values {
                    for base in [0, u64::MAX, 0x1ff] {
                        let mut args = [base; 6];
                        args[usize::from(*arg)] = *v;
                        cases.push(args);
                    }
                }
            }
            for (a, b) in tested.iter().zip(tested.iter().skip(1)) {
                for v in &values {
                    for w in &values {
                        let mut args = [0; 6];
                        args[usize::from(*a)] = *v;
                        args[usize::from(*b)] = *w;
                        cases.push(args);
                    }
                }
            }
            for args in &cases {
                assert_eq!(
                    run(&program, arch, nr, args),
                    expected(&table, nr, args),
                    "{network:?} nr {nr} args {args:x?}"
                );
                checked += 1;
            }
        }
        assert!(checked > 10_000, "{checked}");
    }
}

/// The arguments the table tests for `nr`, in order, without repeats.
fn decide_args(table: &Table, nr: u32) -> Vec<u8> {
    let mut args: Vec<u8> = table
        .iter()
        .filter(|(call, _)| *call == i64::from(nr))
        .flat_map(|(_, r)| r.iter().flat_map(|r| r.when.iter().map(|t| t.arg())))
        .collect();
    args.sort_unstable();
    args.dedup();
    args
}

#[test]
fn other_abis_never_reach_the_table() {
    let arch = audit_arch().unwrap();
    for network in [Network::None, Network::Tcp] {
        let program = compile(&table(network)).unwrap();
        // Another architecture tag (i386 on x86_64, arm on aarch64): the process is killed.
        for other in [0x4000_0003_u32, 0x4000_0028, 0, arch ^ 1] {
            for nr in [0, 41, 59, 272] {
                assert_eq!(
                    run(&program, other, nr, &[0; 6]),
                    libc::SECCOMP_RET_KILL_PROCESS
                );
            }
        }
        if cfg!(target_arch = "x86_64") {
            // Every x32 number answers ENOSYS, whatever the call (x32 socket is 41 | bit).
            for nr in [0, 39, 41, 59, 272, 512, 1023] {
                assert_eq!(
                    run(&program, arch, X32_BIT | nr, &[0; 6]),
                    libc::SECCOMP_RET_ERRNO | ENOSYS
                );
            }
        }
    }
}

#[test]
fn what_the_table_refuses() {
    let none = table(Network::None);
    let tcp = table(Network::Tcp);
    let nr = |n: i64| i64::from(u32::try_from(n).unwrap());
    let args = |a: &[u64]| {
        let mut all = [0_u64; 6];
        all[..a.len()].copy_from_slice(a);
        all
    };
    let inet = u64::from(low(libc::AF_INET));
    let stream = u64::from(low(libc::SOCK_STREAM));
    let dgram = u64::from(low(libc::SOCK_DGRAM));
    // Commands: no socket at all; adapters: TCP only.
    assert_eq!(
        decide(&none, nr(libc::SYS_socket), &args(&[inet, stream])),
        Some(EACCES)
    );
    assert_eq!(
        decide(&tcp, nr(libc::SYS_socket), &args(&[inet, stream])),
        None
    );
    assert_eq!(
        decide(&tcp, nr(libc::SYS_socket), &args(&[inet, dgram])),
        Some(EACCES)
    );
    assert_eq!(
        decide(
            &tcp,
            nr(libc::SYS_socket),
            &args(&[u64::from(low(libc::AF_UNIX)), stream])
        ),
        Some(EACCES)
    );
    assert_eq!(
        decide(
            &tcp,
            nr(libc::SYS_socket),
            &args(&[inet, stream | 0o4000, 17])
        ),
        Some(EACCES),
        "udp by protocol"
    );
    // socketpair(AF_UNIX) only.
    assert_eq!(decide(&none, nr(libc::SYS_socketpair), &args(&[1])), None);
    assert_eq!(
        decide(&none, nr(libc::SYS_socketpair), &args(&[inet])),
        Some(EACCES)
    );
    // No namespaces through clone; a plain fork is fine.
    for flag in NAMESPACE_FLAGS {
        assert_eq!(
            decide(
                &none,
                nr(libc::SYS_clone),
                &args(&[u64::from(low(*flag)) | 0x11])
            ),
            Some(EPERM)
        );
    }
    assert_eq!(
        decide(&none, nr(libc::SYS_clone), &args(&[0x1200011])),
        None
    );
    // Set-id modes: chmod always, openat only when it creates.
    let suid = u64::from(libc::S_ISUID);
    assert_eq!(
        decide(&none, nr(libc::SYS_fchmodat), &args(&[0, 0, suid | 0o755])),
        Some(EPERM)
    );
    assert_eq!(
        decide(&none, nr(libc::SYS_fchmodat), &args(&[0, 0, 0o755])),
        None
    );
    let creat = u64::from(low(libc::O_CREAT));
    assert_eq!(
        decide(&none, nr(libc::SYS_openat), &args(&[0, 0, creat, suid])),
        Some(EPERM)
    );
    assert_eq!(
        decide(&none, nr(libc::SYS_openat), &args(&[0, 0, 0, suid])),
        None
    );
    // Other processes' limits; one's own stays.
    assert_eq!(
        decide(&none, nr(libc::SYS_prlimit64), &args(&[1234])),
        Some(EPERM)
    );
    assert_eq!(decide(&none, nr(libc::SYS_prlimit64), &args(&[0])), None);
    assert_eq!(
        decide(&none, nr(libc::SYS_setpriority), &args(&[0, 0, 5])),
        None
    );
    assert_eq!(
        decide(
            &none,
            nr(libc::SYS_setpriority),
            &args(&[u64::from(low(libc::PRIO_USER.cast_signed())), 0])
        ),
        Some(EPERM)
    );
    // Refused outright, and what answers ENOSYS so libc falls back.
    for (name, call) in REFUSED {
        assert_eq!(decide(&none, *call, &[0; 6]), Some(EPERM), "{name}");
    }
    assert_eq!(decide(&none, nr(libc::SYS_clone3), &[0; 6]), Some(ENOSYS));
    assert_eq!(decide(&none, nr(libc::SYS_openat2), &[0; 6]), Some(ENOSYS));
    assert_eq!(decide(&none, nr(libc::SYS_read), &[0; 6]), None);
}

#[test]
fn one_short_program_per_network() {
    for network in [Network::None, Network::Tcp] {
        let installed = filters(network).unwrap();
        assert_eq!(installed.len(), 1);
        let program = installed.first().unwrap();
        // seccompiler's three programs came to 530 instructions for commands (203 with System
        // V IPC and POSIX message queues refused, one comparison each; 4 more since issue 30:
        // `kcmp`, `pidfd_getfd`, `process_madvise`, `listen`).
        assert!(
            program.len() < 225,
            "{network:?}: {} instructions",
            program.len()
        );
    }
}

/// Issue 30 item 7: SECURITY.md names exactly the system calls the table refuses outright —
/// no more (it claimed `kcmp`, which was not refused), no fewer.
#[test]
fn issue_30_security_md_lists_exactly_the_refused_calls() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../SECURITY.md")).unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| refused system calls (seccomp) |"))
        .expect("SECURITY.md has the row");
    let listed: std::collections::BTreeSet<&str> = row
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|n| {
            n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    let refused: std::collections::BTreeSet<&str> = REFUSED
        .iter()
        .map(|(name, _)| name.trim_start_matches("SYS_"))
        .collect();
    assert_eq!(listed, refused);
    // And every one is refused by the compiled program, for commands and adapters alike.
    for network in [Network::None, Network::Tcp] {
        let table = table(network);
        for (name, call) in REFUSED {
            assert_eq!(decide(&table, *call, &[0; 6]), Some(EPERM), "{name}");
        }
    }
}

/// Issue 30 item 5: the init of a command's PID namespace shares Craik's memory; no confined
/// process may reach it (or Craik) with a `ptrace`-class call.
#[test]
fn issue_30_ptrace_class_calls_are_refused_to_every_confined_process() {
    for net in [Network::None, Network::Tcp] {
        let table = table(net);
        for call in [
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_pidfd_getfd,
            libc::SYS_kcmp,
        ] {
            assert_eq!(decide(&table, call, &[0; 6]), Some(EPERM), "{call}");
        }
    }
}
