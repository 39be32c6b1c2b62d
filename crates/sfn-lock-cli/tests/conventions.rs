//! `sfn-lock run`'s flock and setlock spellings, its exit statuses for a
//! COMMAND it cannot start, the exit-code table in --help, and bad input: a
//! typed usage error, status 2, nothing taken and nothing run. Real
//! processes against the local stack (scripts/local-stack.sh, as `make test`).

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use support::{cli, hold, holder_of, scratch, unique};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn run_held(lock: &str, flags: &[&str]) -> Output {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&[lock, "--", "true"]);
    cli(&args).output().unwrap()
}

#[test]
fn flock_and_setlock_spellings_mean_what_they_do_there() {
    let lock = unique("cli-spellings");
    hold(&lock, "arn:exec:holder", 600);
    // flock -n/--nonblock and setlock -n: one try.
    for flags in [&["-n"][..], &["--nonblock"], &["--no-wait"]] {
        let out = run_held(&lock, flags);
        assert_eq!(out.status.code(), Some(111), "{flags:?}: {}", stderr(&out));
        assert!(stderr(&out).ends_with("not obtained\n"), "{flags:?}");
    }
    // flock -E/--conflict-exit-code: the status for "not obtained".
    for flags in [&["-n", "-E", "5"][..], &["-n", "--conflict-exit-code", "6"]] {
        let want = flags[2].parse::<i32>().unwrap();
        assert_eq!(
            run_held(&lock, flags).status.code(),
            Some(want),
            "{flags:?}"
        );
    }
    // flock -w/--timeout SECONDS: waits that long, saying so, then gives up.
    for flags in [&["-w", "1"][..], &["--timeout", "1"], &["--wait", "1"]] {
        let out = run_held(&lock, flags);
        assert_eq!(out.status.code(), Some(111), "{flags:?}");
        assert!(stderr(&out).contains("waiting (up to 1 s)"), "{flags:?}");
    }
    // setlock -x: exit 0 quietly; -X (setlock's default) undoes it.
    for flags in [&["-n", "-x"][..], &["-n", "--skip-quietly"]] {
        let out = run_held(&lock, flags);
        assert_eq!(out.status.code(), Some(0), "{flags:?}");
        assert!(out.stderr.is_empty(), "{flags:?}: {}", stderr(&out));
    }
    for flags in [&["-n", "-x", "-X"][..], &["-n", "-x", "--no-skip-quietly"]] {
        let out = run_held(&lock, flags);
        assert_eq!(out.status.code(), Some(111), "{flags:?}");
        assert!(stderr(&out).contains("arn:exec:holder"), "{flags:?}");
    }
    // -X with -E: the chosen status (-x alone refuses -E: it means 0).
    assert_eq!(
        run_held(&lock, &["-n", "-x", "-X", "-E", "7"])
            .status
            .code(),
        Some(7)
    );
    // setlock -N waits: the last of -n and -N wins, as in setlock.
    for flags in [&["-n", "-N", "-w", "1"][..], &["-n", "--block", "-w", "1"]] {
        let out = run_held(&lock, flags);
        assert_eq!(out.status.code(), Some(111), "{flags:?}");
        assert!(stderr(&out).contains("waiting (up to 1 s)"), "{flags:?}");
    }
    let once = run_held(&lock, &["-N", "-n"]);
    assert_eq!(once.status.code(), Some(111));
    assert!(!stderr(&once).contains("waiting"), "{}", stderr(&once));
    // A flag given twice means it once, as in flock and setlock (scripts
    // build command lines from pieces).
    let twice = run_held(&lock, &["-n", "-n"]);
    assert_eq!(twice.status.code(), Some(111), "{}", stderr(&twice));
    assert!(!stderr(&twice).contains("waiting"), "{}", stderr(&twice));
    let twice = run_held(&lock, &["-N", "-N", "-w", "1"]);
    assert_eq!(twice.status.code(), Some(111), "{}", stderr(&twice));
    assert!(stderr(&twice).contains("waiting (up to 1 s)"));
}

#[test]
fn a_command_not_found_is_127_and_one_not_executable_126_and_the_lock_is_freed() {
    let (lock, dir) = (unique("cli-exec"), scratch("exec"));
    let missing = dir.join("no-such-command");
    let out = cli(&["run", &lock, "--", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));

    let plain = dir.join("plain-file");
    std::fs::write(&plain, "echo never\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = cli(&["run", &lock, "--", plain.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(stderr(&out).contains("not executable"), "{}", stderr(&out));
    assert_eq!(holder_of(&lock), None, "released after the failed start");
}

#[test]
fn help_has_the_exit_code_table_and_says_where_spellings_come_from() {
    let top = cli(&["--help"]).output().unwrap();
    assert_eq!(top.status.code(), Some(0));
    let help = String::from_utf8_lossy(&top.stdout);
    for line in ["Exit status", "111", "126", "127", "128+N", "  2 ", "  3 "] {
        assert!(help.contains(line), "{line:?} missing from --help:\n{help}");
    }
    let run = cli(&["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&run.stdout);
    for said in [
        "flock -w",
        "flock -n",
        "flock -E",
        "setlock -n",
        "setlock -N",
        "setlock -x",
        "setlock -X",
        "--timeout",
        "--nonblock",
        "126",
        "127",
        "[env: LOCK_STORE_URL",
        "[default: 60]",
        "900",
    ] {
        assert!(
            help.contains(said),
            "{said:?} missing from run --help:\n{help}"
        );
    }
}

#[test]
fn bad_input_is_a_typed_usage_error_status_2_and_takes_and_runs_nothing() {
    let (lock, dir) = (unique("cli-bad-flags"), scratch("bad-flags"));
    let ran = dir.join("ran");
    let script = format!("echo ran > {}", ran.display());
    for (flags, said) in [
        (
            &["-w", "soon"][..],
            "invalid value 'soon' for '--wait <SECONDS>'",
        ),
        (&["--wait=-1"], "invalid value '-1' for '--wait <SECONDS>'"),
        (
            &["-E", "256"],
            "invalid value '256' for '--conflict-exit-code <N>'",
        ),
        (&["-n", "-w", "5"], "cannot be used with"),
        (&["-x", "-E", "5"], "cannot be used with"),
        (
            &["--lease", "soon"],
            "invalid value 'soon' for '--lease <SECONDS>'",
        ),
        (&["--nonblok"], "unexpected argument '--nonblok'"),
    ] {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&[&lock, "--", "sh", "-c", &script]);
        let out = cli(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(said), "{flags:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{flags:?}");
    }
    for args in [
        &["status", "--exit-code", "bad\u{7}name"][..],
        &["completions", "tcsh"],
        &["completions"],
    ] {
        let out = cli(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(!ran.exists(), "COMMAND never ran");
    assert_eq!(holder_of(&lock), None, "nothing taken");
}
