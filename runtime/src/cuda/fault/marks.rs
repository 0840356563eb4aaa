//! Device progress: the marks of a run ([`MarkTracker`]) and the deadline-bounded wait over
//! them ([`wait_progress`]).

use std::time::{Duration, Instant};

/// The marks of one run (events recorded after each stream's work of a phase), in enqueue
/// order, and how far each stream has got. Pure bookkeeping: the caller says whether a mark
/// completed.
#[derive(Debug, Clone)]
pub struct MarkTracker {
    /// (phase index, stream) of each mark.
    marks: Vec<(usize, usize)>,
    /// Per stream (sorted by stream id): the marks in order, and the next unfinished one.
    streams: Vec<(usize, Vec<usize>, usize)>,
}

impl MarkTracker {
    /// `marks[i]` = (phase index, stream id) of mark `i`; a stream's marks must appear in the
    /// order the stream runs them (phase indices non-decreasing per stream).
    pub fn new(marks: Vec<(usize, usize)>) -> MarkTracker {
        let mut by: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for (i, (_, s)) in marks.iter().enumerate() {
            by.entry(*s).or_default().push(i);
        }
        MarkTracker {
            marks,
            streams: by.into_iter().map(|(s, v)| (s, v, 0)).collect(),
        }
    }

    /// Number of marks.
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    /// No marks at all.
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// (phase index, stream id) of mark `i`.
    pub fn mark(&self, i: usize) -> (usize, usize) {
        self.marks[i]
    }

    /// Every mark unfinished again (a new run).
    pub fn reset(&mut self) {
        for s in &mut self.streams {
            s.2 = 0;
        }
    }

    /// Queries, per stream, its next unfinished mark below `upto` (and the following ones
    /// while they are complete: a stream finishes its marks in order); returns whether any
    /// mark completed.
    ///
    /// # Errors
    /// The first error of `done`.
    pub fn poll<E>(
        &mut self,
        upto: usize,
        mut done: impl FnMut(usize) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let mut moved = false;
        for (_, marks, next) in &mut self.streams {
            while *next < marks.len() && marks[*next] < upto {
                if done(marks[*next])? {
                    *next += 1;
                    moved = true;
                } else {
                    break;
                }
            }
        }
        Ok(moved)
    }

    /// Whether every mark below `upto` has completed.
    pub fn finished(&self, upto: usize) -> bool {
        self.streams
            .iter()
            .all(|(_, m, next)| *next >= m.len() || m[*next] >= upto)
    }

    /// The first phase with an unfinished mark below `upto`, and the streams unfinished in it.
    pub fn stalled_at(&self, upto: usize) -> Option<(usize, Vec<usize>)> {
        let pending: Vec<(usize, usize)> = self
            .streams
            .iter()
            .filter(|(_, m, next)| *next < m.len() && m[*next] < upto)
            .map(|(s, m, next)| (self.marks[m[*next]].0, *s))
            .collect();
        let first = pending.iter().map(|p| p.0).min()?;
        Some((
            first,
            pending
                .into_iter()
                .filter(|p| p.0 == first)
                .map(|p| p.1)
                .collect(),
        ))
    }
}

/// How [`wait_progress`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitEnd {
    /// Every mark below `upto` completed.
    Done,
    /// No mark completed for the stage timeout: the first unfinished phase, its unfinished
    /// streams, and how long nothing moved.
    Stalled {
        phase: usize,
        streams: Vec<usize>,
        secs: f64,
    },
}

/// What [`wait_progress`] calls back into: the clock, the mark queries, extra checks (NCCL
/// errors), the heartbeat and the nap. A trait so that tests can drive it with a fake clock.
pub trait WaitHooks {
    type Error;
    fn now(&mut self) -> Instant;
    /// Whether mark `i` has completed (an error: a device fault).
    fn done(&mut self, i: usize) -> Result<bool, Self::Error>;
    /// Called about every 50 ms of waiting (NCCL asynchronous errors).
    fn check(&mut self) -> Result<(), Self::Error>;
    /// Called every iteration (the host is alive).
    fn beat(&mut self);
    fn sleep(&mut self, d: Duration);
}

/// Polls the marks below `upto` until all complete, or until none completes for `limit`.
/// Naps start at 20 us and double up to 2 ms.
///
/// # Errors
/// The first error of a hook.
pub fn wait_progress<H: WaitHooks>(
    tracker: &mut MarkTracker,
    upto: usize,
    limit: Duration,
    hooks: &mut H,
) -> Result<WaitEnd, H::Error> {
    let mut last = hooks.now();
    let mut last_check = last;
    let mut nap = Duration::from_micros(20);
    loop {
        hooks.beat();
        let moved = tracker.poll(upto, |i| hooks.done(i))?;
        if tracker.finished(upto) {
            return Ok(WaitEnd::Done);
        }
        let now = hooks.now();
        if moved {
            last = now;
            nap = Duration::from_micros(20);
        }
        if now.duration_since(last_check) >= Duration::from_millis(50) {
            hooks.check()?;
            last_check = now;
        }
        let idle = now.duration_since(last);
        if idle >= limit {
            let (phase, streams) = tracker.stalled_at(upto).unwrap_or((0, Vec::new()));
            return Ok(WaitEnd::Stalled {
                phase,
                streams,
                secs: idle.as_secs_f64(),
            });
        }
        hooks.sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(2));
    }
}
