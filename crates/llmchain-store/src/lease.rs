//! The rules of leases, shared by both backends: whether a write's lease is the run's
//! current one, and where a run goes after a failed attempt.

use crate::error::{StoreError, StoreResult};
use crate::model::{Lease, RunKind, RunStatus};

/// What a fenced write reads of its run (inside the write's transaction, with the row
/// locked): conversation, status, lease owner, lease expiry, epoch.
pub(crate) type LeaseRow = (String, String, Option<String>, Option<i64>, i64);

/// The run's conversation when `lease` is the run's live lease at `now`; otherwise why
/// not: `RunCancelled` for a cancelled run, `LeaseLost` for anything else (expired,
/// claimed again, finished, paused by the new owner).
pub(crate) fn verdict(row: Option<LeaseRow>, lease: &Lease, now: i64) -> StoreResult<String> {
    let (conversation, status, owner, expires, epoch) =
        row.ok_or_else(|| StoreError::RunNotFound(lease.run_id.clone()))?;
    if status == RunStatus::Cancelled.as_str() {
        return Err(StoreError::RunCancelled {
            run: lease.run_id.clone(),
        });
    }
    let live = status == RunStatus::Running.as_str()
        && owner.as_deref() == Some(lease.worker_id.as_str())
        && epoch == lease.epoch
        && expires.is_some_and(|e| e > now);
    if live {
        Ok(conversation)
    } else {
        Err(StoreError::LeaseLost {
            run: lease.run_id.clone(),
            worker: lease.worker_id.clone(),
        })
    }
}

/// Where a run goes after a failed attempt: a queued run back to `pending` at `run_at`
/// while it has attempts left and the failure may pass, `discarded` otherwise; an
/// interactive run (its process is not retried) `failed`.
pub(crate) fn after_failure(
    kind: RunKind,
    attempt: i32,
    max_attempts: i32,
    retryable: bool,
    now: i64,
) -> (RunStatus, i64) {
    if kind == RunKind::Interactive {
        (RunStatus::Failed, now)
    } else if retryable && attempt < max_attempts {
        let wait = crate::model::duration_ms(crate::model::backoff(attempt));
        (RunStatus::Pending, now.saturating_add(wait))
    } else {
        (RunStatus::Discarded, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease {
            run_id: "r".into(),
            worker_id: "w".into(),
            epoch: 3,
        }
    }

    fn row(status: &str, owner: &str, expires: i64, epoch: i64) -> Option<LeaseRow> {
        Some((
            "c".into(),
            status.into(),
            Some(owner.into()),
            Some(expires),
            epoch,
        ))
    }

    #[test]
    fn only_the_current_live_lease_passes() {
        assert_eq!(
            verdict(row("running", "w", 10, 3), &lease(), 5).unwrap(),
            "c"
        );
        for (status, owner, expires, epoch) in [
            ("running", "w", 5, 3),      // expired
            ("running", "w", 10, 4),     // claimed again, by the same worker name
            ("running", "other", 10, 3), // another worker
            ("pending", "w", 10, 3),
            ("done", "w", 10, 3),
            ("paused", "w", 10, 3),
        ] {
            let e = verdict(row(status, owner, expires, epoch), &lease(), 5).unwrap_err();
            assert!(
                matches!(e, StoreError::LeaseLost { .. }),
                "{status} {owner}: {e}"
            );
        }
        let e = verdict(row("cancelled", "w", 10, 3), &lease(), 5).unwrap_err();
        assert!(matches!(e, StoreError::RunCancelled { .. }));
        let e = verdict(None, &lease(), 5).unwrap_err();
        assert!(matches!(e, StoreError::RunNotFound(_)));
    }

    #[test]
    fn failures_back_off_then_discard() {
        let (s, at) = after_failure(RunKind::Queued, 1, 3, true, 1_000);
        assert_eq!(s, RunStatus::Pending);
        assert!((2_000..=2_250).contains(&at), "{at}");
        let (s, at) = after_failure(RunKind::Queued, 3, 3, true, 1_000);
        assert_eq!((s, at), (RunStatus::Discarded, 1_000));
        let (s, _) = after_failure(RunKind::Queued, 1, 3, false, 1_000);
        assert_eq!(s, RunStatus::Discarded);
        // Back-off doubles and is capped.
        let b = |a| crate::model::backoff(a).as_millis();
        assert!((4_000..=5_000).contains(&b(3)));
        assert!(b(30) <= 375_000);
    }
}
