use super::*;
use std::sync::Arc;
use std::time::Instant;

#[test]
fn fault_specs() {
    let f = FaultSpec::parse("hang-rank=1@stage=2").unwrap();
    assert_eq!(
        f,
        FaultSpec {
            kind: FaultKind::Hang,
            rank: 1,
            stage: 2,
            run: 1
        }
    );
    assert_eq!(f.to_string(), "hang-rank=1@stage=2");
    let g = FaultSpec::parse("exit-rank=1@stage=2@run=3").unwrap();
    assert_eq!((g.kind, g.stage, g.run), (FaultKind::Exit, 2, 3));
    assert_eq!(g.to_string(), "exit-rank=1@stage=2@run=3");
    for t in [
        "exit-rank=0@stage=1",
        "host-hang-rank=3@stage=7",
        " hang-rank=1@stage=2 ",
        "hang-rank=1@stage=2@run=1",
    ] {
        let f = FaultSpec::parse(t).unwrap();
        assert_eq!(FaultSpec::parse(&f.to_string()).unwrap(), f);
    }
    assert_eq!(
        FaultSpec::parse("host-hang-rank=3@stage=7").unwrap().kind,
        FaultKind::HostHang
    );
    for (t, why) in [
        ("hang-rank=1", "no '@stage=S'"),
        ("hang=1@stage=2", "no '-rank=R'"),
        ("crash-rank=1@stage=2", "unknown kind 'crash'"),
        ("hang-rank=x@stage=2", "rank 'x'"),
        ("hang-rank=1@step=2", "'stage=S'"),
        ("hang-rank=1@stage=0", "count from 1"),
        ("hang-rank=1@stage=-2", "stage '-2'"),
        ("hang-rank=1@stage=2@try=2", "'run=K'"),
        ("hang-rank=1@stage=2@run=0", "runs count from 1"),
        ("hang-rank=1@stage=2@run=x", "run 'x'"),
    ] {
        let e = FaultSpec::parse(t).unwrap_err();
        assert!(
            e.contains(why) && e.contains("expected exit-rank"),
            "{t}: {e}"
        );
    }
    let f = FaultSpec::parse("exit-rank=1@stage=2").unwrap();
    assert!(f.validate(2, 2).is_ok());
    assert!(f.validate(1, 2).unwrap_err().contains("ranks 0..0"));
    assert!(f.validate(2, 1).unwrap_err().contains("stages 1..1"));
}

#[test]
fn phases_and_reports() {
    assert_eq!(Phase::from_index(0, 8), Phase::Init);
    assert_eq!(Phase::from_index(1, 8), Phase::Stage(0));
    assert_eq!(Phase::from_index(8, 8), Phase::Stage(7));
    assert_eq!(Phase::from_index(9, 8), Phase::Outputs);
    assert_eq!(Phase::Stage(1).describe(8), "stage 2/8");
    assert!(Phase::Outputs.describe(8).contains("after stage 8/8"));
    assert!(Phase::Init.describe(8).contains("before stage 1/8"));
    let r = FaultReport {
        who: Who {
            ranks: vec![0],
            gpus: vec![0],
            pid: 4242,
        },
        at: Phase::Stage(1).describe(8),
        cause: Cause::NoProgress {
            secs: 10.04,
            limit: 10.0,
        },
        peers: vec!["rank 1 (process 1)".into()],
        notes: vec!["NCCL communicators aborted".into()],
    };
    let s = r.to_string();
    assert!(
        s.starts_with(
            "error: rank 0 (pid 4242, GPU 0) stage 2/8: no progress for 10 s (stage timeout 10 s)"
        ),
        "{s}"
    );
    assert!(s.contains("; peers in this group: rank 1 (process 1); NCCL communicators aborted"));
    let w = Who {
        ranks: vec![0, 1],
        gpus: vec![0, 0],
        pid: 7,
    };
    assert_eq!(w.to_string(), "ranks 0, 1 (pid 7, GPU 0)");
    let w = Who {
        ranks: vec![2, 3],
        gpus: vec![0, 1],
        pid: 7,
    };
    assert_eq!(w.to_string(), "ranks 2, 3 (pid 7, GPUs 0, 1)");
    let none = FaultReport {
        peers: vec![],
        cause: Cause::Signal("SIGTERM"),
        ..r
    };
    assert!(none
        .to_string()
        .contains("terminated by SIGTERM (a launcher stops every process"));
    assert!(none.to_string().contains("peers in this group: none"));
}

/// Marks of 2 ranks over init, 2 stages and outputs: streams 0, 1 compute, 2, 3 transfer.
fn tracker() -> MarkTracker {
    MarkTracker::new(vec![
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 2),
        (1, 1),
        (1, 3),
        (2, 0),
        (2, 3),
        (2, 1),
        (3, 0),
        (3, 1),
    ])
}

#[test]
fn tracker_follows_streams_in_order() {
    let mut t = tracker();
    assert_eq!(t.len(), 11);
    // Everything up to mark 5 done, except stream 3's stage-1 mark (5).
    let done = |i: usize| Ok::<_, ()>(i != 5 && i < 9);
    assert!(t.poll(11, done).unwrap());
    assert!(!t.finished(11));
    // Stream 3 is the only one stuck in phase 1; stream 0 and 1 went on to phase 3.
    assert_eq!(t.stalled_at(11), Some((1, vec![3])));
    // Below `upto` = 5 (marks 0..4 enqueued), everything is done.
    assert!(t.finished(5));
    // A later poll finishes everything.
    assert!(t.poll(11, |_| Ok::<_, ()>(true)).unwrap());
    assert!(t.finished(11));
    assert_eq!(t.stalled_at(11), None);
    // A stream never queries a mark after an unfinished one.
    t.reset();
    let mut asked = Vec::new();
    t.poll(11, |i| {
        asked.push(i);
        Ok::<_, ()>(false)
    })
    .unwrap();
    asked.sort();
    assert_eq!(asked, vec![0, 1, 3, 5]);
    // Errors pass through.
    assert_eq!(t.poll(11, |_| Err::<bool, _>("boom")), Err("boom"));
}

/// A fake clock: every call advances 1 ms; marks complete at given times.
struct Fake {
    t0: Instant,
    ms: u64,
    done_at: Vec<Option<u64>>,
    checks: usize,
    beats: usize,
    fail_check_at: Option<u64>,
}

impl WaitHooks for Fake {
    type Error = String;
    fn now(&mut self) -> Instant {
        self.t0 + Duration::from_millis(self.ms)
    }
    fn done(&mut self, i: usize) -> Result<bool, String> {
        Ok(self.done_at[i].is_some_and(|t| t <= self.ms))
    }
    fn check(&mut self) -> Result<(), String> {
        self.checks += 1;
        match self.fail_check_at {
            Some(t) if self.ms >= t => Err(format!("nccl error at {}", self.ms)),
            _ => Ok(()),
        }
    }
    fn beat(&mut self) {
        self.beats += 1;
    }
    fn sleep(&mut self, d: Duration) {
        self.ms += d.as_millis().max(1) as u64;
    }
}

fn fake(done_at: Vec<Option<u64>>) -> Fake {
    Fake {
        t0: Instant::now(),
        ms: 0,
        done_at,
        checks: 0,
        beats: 0,
        fail_check_at: None,
    }
}

#[test]
fn wait_ends_when_every_mark_completes() {
    let mut t = tracker();
    // Marks complete one every 500 ms: slower than nothing, faster than the 1 s limit.
    let mut h = fake((0..11).map(|i| Some(500 * i as u64)).collect());
    let end = wait_progress(&mut t, 11, Duration::from_secs(1), &mut h).unwrap();
    assert_eq!(end, WaitEnd::Done);
    assert!(h.ms >= 5000, "{}", h.ms);
    assert!(h.checks > 10 && h.beats > 10);
}

#[test]
fn wait_reports_the_first_stalled_phase() {
    let mut t = tracker();
    // Stream 2's stage-1 mark (3) never completes; the rest by 100 ms (except what
    // follows mark 3 on stream 2: nothing).
    let mut done: Vec<Option<u64>> = vec![Some(100); 11];
    done[3] = None;
    let mut h = fake(done);
    let end = wait_progress(&mut t, 11, Duration::from_secs(2), &mut h).unwrap();
    match end {
        WaitEnd::Stalled {
            phase,
            streams,
            secs,
        } => {
            assert_eq!((phase, streams), (1, vec![2]));
            assert!((2.0..2.1).contains(&secs), "{secs}");
        }
        e => panic!("{e:?}"),
    }
    // The limit counts from the last completion: 100 ms + 2 s.
    assert!((2100..2200).contains(&h.ms), "{}", h.ms);
}

#[test]
fn wait_passes_check_errors() {
    let mut t = tracker();
    let mut h = fake(vec![None; 11]);
    h.fail_check_at = Some(300);
    let e = wait_progress(&mut t, 11, Duration::from_secs(60), &mut h).unwrap_err();
    assert!(e.starts_with("nccl error at"));
    assert!(h.ms < 400);
}

/// The child side of the two tests below (ignored in ordinary runs; they start it in a
/// process of its own, as `--ignored --exact` with `MERCURY_WATCHDOG_CHILD` set).
#[test]
#[ignore = "helper: runs only as the child process of the watchdog tests"]
fn watchdog_child() {
    let mode = std::env::var("MERCURY_WATCHDOG_CHILD").unwrap_or_default();
    if mode.is_empty() {
        return;
    }
    Watchdog::start().unwrap();
    let p = progress();
    p.set_context(
        Arc::new(Who {
            ranks: vec![3],
            gpus: vec![1],
            pid: std::process::id(),
        }),
        4,
        Arc::new(vec![
            vec![],
            vec!["rank 2 (process 1)".into()],
            vec![],
            vec![],
        ]),
    );
    let limit = if mode == "block" {
        Duration::from_millis(300)
    } else {
        Duration::from_secs(60)
    };
    let _g = p.arm(Phase::Stage(1), limit, "in a call that never returns");
    println!("ready");
    use std::io::Write as _;
    std::io::stdout().flush().unwrap();
    // A host thread blocked in a call: only the watchdog can end this process.
    std::thread::sleep(Duration::from_secs(30));
    panic!("the watchdog did not end the process within 30 s");
}

/// Runs [`watchdog_child`] in `mode`; with `term`, sends it SIGTERM once it is ready.
fn child(mode: &str) -> (Option<i32>, String, Duration) {
    use std::io::BufRead as _;
    let t = Instant::now();
    let mut c = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "cuda::fault::tests::watchdog_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MERCURY_WATCHDOG_CHILD", mode)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = c.stdout.take().unwrap();
    for line in std::io::BufReader::new(out).lines() {
        if line.unwrap().contains("ready") {
            break;
        }
    }
    if mode == "term" {
        // SAFETY: a signal to the child this test started.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
    }
    let o = c.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        t.elapsed(),
    )
}

/// A host blocked past the limit: the watchdog prints the report and exits with 1.
#[test]
fn watchdog_ends_a_blocked_process() {
    let (code, err, took) = child("block");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("error: rank 3 (pid ") && err.contains(", GPU 1) stage 2/4: no progress for"),
        "{err}"
    );
    assert!(err.contains("the host thread is blocked in a call that never returns; peers in this group: rank 2 (process 1)"), "{err}");
    assert!(took < Duration::from_secs(25), "{took:?}");
}

/// SIGTERM (a launcher stopping the survivors) becomes the report and exit status 1.
#[test]
fn sigterm_becomes_a_report() {
    let (code, err, took) = child("term");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("stage 2/4: terminated by SIGTERM"), "{err}");
    assert!(took < Duration::from_secs(25), "{took:?}");
}

#[test]
fn watchdog_progress_bookkeeping() {
    let p = Progress::default();
    // Disarmed: never a report.
    assert!(p.check_host().is_none());
    p.set_context(
        Arc::new(Who {
            ranks: vec![1],
            gpus: vec![1],
            pid: 99,
        }),
        4,
        Arc::new(vec![
            vec![],
            vec!["rank 0 (process 0)".into()],
            vec![],
            vec![],
        ]),
    );
    {
        // Generous limits where the test expects no report (a loaded CI machine may
        // deschedule this thread for a while), tight ones where it expects one.
        let _g = p.arm(Phase::Stage(1), Duration::from_secs(30), "enqueueing");
        assert!(p.check_host().is_none());
        p.set_limit(Duration::from_millis(30));
        std::thread::sleep(Duration::from_millis(80));
        let r = p.check_host().expect("blocked past the limit");
        assert!(
            r.starts_with("error: rank 1 (pid 99, GPU 1) stage 2/4: no progress for"),
            "{r}"
        );
        assert!(r.contains("the host thread is blocked enqueueing"), "{r}");
        assert!(r.contains("peers in this group: rank 0 (process 0)"), "{r}");
        p.set_limit(Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(80));
        assert!(p.check_host().is_none(), "the new limit applies");
        p.set_limit(Duration::from_millis(30));
        p.set_pending(Some("error: rank 1 ... (earlier report)".into()));
        std::thread::sleep(Duration::from_millis(80));
        let r = p.check_host().unwrap();
        assert!(
            r.starts_with("error: rank 1 ... (earlier report); then the host thread blocked"),
            "{r}"
        );
    }
    // The guard disarmed it, and a new limit does not re-arm it.
    p.set_limit(Duration::from_millis(1));
    std::thread::sleep(Duration::from_millis(40));
    assert!(p.check_host().is_none());
    assert_eq!(p.setup_timeout(), DEFAULT_SETUP_TIMEOUT);
    p.set_setup_timeout(Duration::from_secs(7));
    assert_eq!(p.setup_timeout(), Duration::from_secs(7));
    let s = p.report(Cause::Signal("SIGTERM"));
    assert!(
        s.contains("outside any GPU stage: terminated by SIGTERM"),
        "{s}"
    );
}
