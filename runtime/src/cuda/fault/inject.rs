//! Fault injection: [`FaultSpec`] (`exit`, `hang`, `host-hang` of one rank before one stage),
//! parsed from `mercury-run --inject-fault` and fired by the executor.

use std::fmt;

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The process driving the rank kills itself with SIGKILL (after its earlier stages have
    /// finished on the device).
    Exit,
    /// The rank's compute and transfer streams wait forever on a device word: every later
    /// operation of the rank stays queued (a device-side hang).
    Hang,
    /// The host thread of the rank's process blocks forever before enqueuing the stage.
    HostHang,
}

/// A fault to inject: `kind` on `rank` before stage `stage` of run `run` (both 1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    pub rank: usize,
    /// 1-based, as stages appear in reports.
    pub stage: usize,
    /// 1-based: the executor's first run is 1.
    pub run: usize,
}

const SPEC_FORMS: &str = "exit-rank=R@stage=S, hang-rank=R@stage=S or host-hang-rank=R@stage=S, optionally followed by @run=K (S and K count from 1)";

impl FaultSpec {
    /// Parses `exit-rank=R@stage=S`, `hang-rank=R@stage=S` or `host-hang-rank=R@stage=S`,
    /// optionally followed by `@run=K`.
    ///
    /// # Errors
    /// A message quoting the text and listing the accepted forms.
    pub fn parse(text: &str) -> Result<FaultSpec, String> {
        let t = text.trim();
        let bad = |why: &str| format!("fault '{t}': {why}; expected {SPEC_FORMS}");
        let (who, at) = t.split_once('@').ok_or_else(|| bad("no '@stage=S'"))?;
        let (at, run) = match at.split_once('@') {
            Some((a, r)) => {
                let r = r
                    .strip_prefix("run=")
                    .ok_or_else(|| bad("the part after the second '@' must be 'run=K'"))?;
                let k = r
                    .parse::<usize>()
                    .map_err(|_| bad(&format!("run '{r}' is not a number")))?;
                if k == 0 {
                    return Err(bad("runs count from 1"));
                }
                (a, k)
            }
            None => (at, 1),
        };
        let (kind, rank) = who
            .split_once("-rank=")
            .ok_or_else(|| bad("no '-rank=R'"))?;
        let kind = match kind {
            "exit" => FaultKind::Exit,
            "hang" => FaultKind::Hang,
            "host-hang" => FaultKind::HostHang,
            k => return Err(bad(&format!("unknown kind '{k}'"))),
        };
        let rank = rank
            .parse::<usize>()
            .map_err(|_| bad(&format!("rank '{rank}' is not a number")))?;
        let stage = at
            .strip_prefix("stage=")
            .ok_or_else(|| bad("the part after '@' must be 'stage=S'"))?;
        let stage = stage
            .parse::<usize>()
            .map_err(|_| bad(&format!("stage '{stage}' is not a number")))?;
        if stage == 0 {
            return Err(bad("stages count from 1"));
        }
        Ok(FaultSpec {
            kind,
            rank,
            stage,
            run,
        })
    }

    /// Checks the fault against a plan of `ranks` ranks and `stages` stages.
    ///
    /// # Errors
    /// The rank or the stage does not exist.
    pub fn validate(&self, ranks: usize, stages: usize) -> Result<(), String> {
        if self.rank >= ranks {
            return Err(format!(
                "fault {self}: the plan has ranks 0..{}",
                ranks.saturating_sub(1)
            ));
        }
        if self.stage > stages {
            return Err(format!("fault {self}: the plan has stages 1..{stages}"));
        }
        Ok(())
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = match self.kind {
            FaultKind::Exit => "exit",
            FaultKind::Hang => "hang",
            FaultKind::HostHang => "host-hang",
        };
        write!(f, "{k}-rank={}@stage={}", self.rank, self.stage)?;
        if self.run != 1 {
            write!(f, "@run={}", self.run)?;
        }
        Ok(())
    }
}
