//! Where working directories go, decided from the modes on the way to them.

use super::*;

fn path(steps: &[(&str, u32)]) -> Vec<Step> {
    steps.iter().map(|(dir, mode)| (PathBuf::from(dir), 0o40000 | mode)).collect()
}

#[test]
fn the_first_directory_closed_to_other_users_is_found() {
    /// The directories on a path with their modes, and the first one closed to other users.
    type Case<'a> = (&'a [(&'a str, u32)], Option<&'a str>);
    let cases: &[Case<'_>] = &[
        (&[("/", 0o755), ("/var", 0o755), ("/var/lib", 0o755)], None),
        (&[("/", 0o755), ("/root", 0o700), ("/root/kayra-data", 0o755)], Some("/root")),
        (&[("/", 0o755), ("/home", 0o755), ("/home/ada", 0o750)], Some("/home/ada")),
        (&[("/", 0o755), ("/srv", 0o711)], None),
        (&[("/", 0o755), ("/tmp", 0o1777)], None),
    ];
    for (steps, expect) in cases {
        let steps = path(steps);
        let found = first_closed(&steps).map(|(dir, _)| dir.to_str().unwrap());
        assert_eq!(found, *expect, "{steps:?}");
    }
}

#[test]
fn working_directories_go_where_the_workloads_user_can_reach_them() {
    let open_data =
        path(&[("/", 0o755), ("/var", 0o755), ("/var/lib", 0o755), ("/var/lib/kayra-agent", 0o711)]);
    let closed_data = path(&[("/", 0o755), ("/root", 0o700), ("/root/kayra-data/agent", 0o711)]);
    let open_root = path(&[("/", 0o755), ("/var", 0o755), ("/var/lib", 0o755)]);
    let closed_root = path(&[("/", 0o755), ("/var", 0o755), ("/var/lib", 0o750)]);
    let root = Path::new("/var/lib/kayra/work");
    let under = WorkDirs::Under(PathBuf::from("/var/lib/kayra/work/n1"));
    let refused = Err(Unreachable {
        data_dir_closed: closed_data[1].clone(),
        work_root: root.to_owned(),
        work_root_closed: closed_root[2].clone(),
    });
    /// Whether the agent is root, the path to the data directory, to the work root, and where
    /// the working directories go.
    type Case<'a> = (bool, &'a [Step], &'a [Step], Result<WorkDirs, Unreachable>);
    let cases: Vec<Case<'_>> = vec![
        (true, &open_data, &open_root, Ok(WorkDirs::InDataDir)),
        (true, &open_data, &closed_root, Ok(WorkDirs::InDataDir)),
        (true, &closed_data, &open_root, Ok(under.clone())),
        (true, &closed_data, &closed_root, refused),
        // Not root: the workloads run as the agent's own user, who reaches its data directory.
        (false, &closed_data, &closed_root, Ok(WorkDirs::InDataDir)),
    ];
    for (agent_is_root, data_dir, work_root_path, expect) in cases {
        let got = choose(agent_is_root, data_dir, root, work_root_path, "n1");
        assert_eq!(got, expect, "root {agent_is_root}, data {data_dir:?}, work root {work_root_path:?}");
    }
}
