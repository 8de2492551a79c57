use super::*;

/// This machine's shape (hybrid: v1 controllers, a v2 mount with none of them).
const HYBRID_CGROUP: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/76dd\n0::/\n";
const HYBRID_MOUNTS: &str = "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n\
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0\n\
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";

fn delegated_service() -> Observed {
    Observed {
        mount: Some("/sys/fs/cgroup".into()),
        own: Some("user.slice/user-1000.slice/craik.service".into()),
        controllers: Some("cpuset cpu io memory pids\n".into()),
        subtree_control: Some("\n".into()),
        has_processes: true,
        writable: true,
    }
}

#[test]
fn issue_30_the_own_cgroup_is_the_0_line() {
    assert_eq!(own_cgroup(HYBRID_CGROUP), Some(""));
    assert_eq!(
        own_cgroup("0::/user.slice/craik.service\n"),
        Some("user.slice/craik.service")
    );
    assert_eq!(own_cgroup("4:memory:/x\n1:cpu:/\n"), None);
}

#[test]
fn issue_30_the_cgroup2_mount_is_found_and_unescaped() {
    assert_eq!(
        cgroup2_mount(HYBRID_MOUNTS),
        Some(PathBuf::from("/sys/fs/cgroup/unified"))
    );
    assert_eq!(
        cgroup2_mount("cgroup2 /mnt/a\\040b cgroup2 rw 0 0\n"),
        Some(PathBuf::from("/mnt/a b"))
    );
    assert_eq!(
        cgroup2_mount("cgroup /sys/fs/cgroup/pids cgroup rw 0 0\n"),
        None
    );
}

#[test]
fn issue_30_this_machines_hybrid_hierarchy_is_not_delegated_and_says_why() {
    let seen = Observed {
        mount: cgroup2_mount(HYBRID_MOUNTS),
        own: own_cgroup(HYBRID_CGROUP).map(str::to_owned),
        controllers: Some("hugetlb\n".into()),
        subtree_control: Some(String::new()),
        has_processes: true,
        writable: true,
    };
    assert_eq!(
        plan_delegation(&seen),
        Err("the cgroup v2 at `/sys/fs/cgroup/unified` offers no pids, memory, cpu controller (offered: hugetlb; in a hybrid hierarchy they are bound to cgroup v1)".into())
    );
    let none = Observed {
        controllers: Some(String::new()),
        ..seen.clone()
    };
    assert!(
        plan_delegation(&none)
            .unwrap_err()
            .contains("(offered: none;")
    );
    let unmounted = Observed {
        mount: None,
        ..seen
    };
    assert_eq!(
        plan_delegation(&unmounted),
        Err("no cgroup2 file system is mounted".into())
    );
}

#[test]
fn issue_30_a_delegated_service_cgroup_moves_craik_to_a_leaf_and_enables_the_controllers() {
    assert_eq!(
        plan_delegation(&delegated_service()),
        Ok(Delegated {
            base: "/sys/fs/cgroup/user.slice/user-1000.slice/craik.service".into(),
            move_self_to: Some(
                "/sys/fs/cgroup/user.slice/user-1000.slice/craik.service/craik-host".into()
            ),
            enable: vec!["pids", "memory", "cpu"],
        })
    );
    // Already set up (a second Craik in the same cgroup, or the operator did it): nothing to
    // move, nothing to enable.
    let ready = Observed {
        subtree_control: Some("cpu memory pids\n".into()),
        ..delegated_service()
    };
    assert_eq!(
        plan_delegation(&ready),
        Ok(Delegated {
            base: "/sys/fs/cgroup/user.slice/user-1000.slice/craik.service".into(),
            move_self_to: None,
            enable: vec![],
        })
    );
    // The root cgroup (a container's own namespace) may hold processes and enable them.
    let root = Observed {
        own: Some(String::new()),
        ..delegated_service()
    };
    assert_eq!(
        plan_delegation(&root).map(|d| (d.base, d.move_self_to)),
        Ok((PathBuf::from("/sys/fs/cgroup"), None))
    );
}

#[test]
fn issue_30_a_cgroup_craik_cannot_write_is_not_delegated() {
    let foreign = Observed {
        writable: false,
        ..delegated_service()
    };
    assert_eq!(
        plan_delegation(&foreign),
        Err("Craik's cgroup `/sys/fs/cgroup/user.slice/user-1000.slice/craik.service` is not delegated to it (not writable)".into())
    );
}

#[test]
fn issue_30_the_default_limits_and_the_files_they_write() {
    let limits = CommandLimits::defaults(8 << 30, 2);
    assert_eq!(
        limits,
        CommandLimits {
            pids_max: 4096,
            memory_max: 6 << 30,
            cpu_quota_us: 180_000,
        }
    );
    assert_eq!(
        limits.files(),
        [
            ("pids.max", "4096".to_owned()),
            ("memory.max", "6442450944".to_owned()),
            ("cpu.max", "180000 100000".to_owned()),
        ]
    );
    // A quota below the kernel's least (1 ms) is raised to it.
    let tiny = CommandLimits {
        cpu_quota_us: 1,
        ..limits
    };
    assert_eq!(tiny.files()[2], ("cpu.max", "1000 100000".to_owned()));
    assert_eq!(
        mem_total("MemTotal:        8039464 kB\nMemFree: 1 kB\n"),
        Some(8_039_464 * 1024)
    );
    assert_eq!(mem_total("MemFree: 1 kB\n"), None);
}
