//! Group commit: many appenders, one writer at a time, one `write` and one fsync per group.
//!
//! # How it works
//! [`Wal::append`] checks and frames a record (checksum computed before taking the lock), then
//! copies it into `State::pending` under a short mutex and returns its sequence number.
//! [`Wal::wait_durable`] waits until the record is settled. A waiter that finds no leader
//! becomes the leader: it takes the whole pending buffer (every record appended so far, its own
//! included), releases the mutex, writes the group with one `write_all_at`, calls `sync_data`
//! once under [`Durability::Fsync`](super::Durability::Fsync), then takes the mutex again,
//! publishes the outcome and wakes everybody. While it does I/O, new appends collect in the
//! pending buffer for the next group: the busier the log, the bigger the groups.
//!
//! # Invariants (all under the `state` mutex)
//! - Sequences are handed out 1, 2, 3, … in append order; the pending buffer holds exactly the
//!   records `pending_first_sequence..next_sequence`, framed, in order.
//! - At most one leader (`leader_active`); only the leader touches the [`LogFile`], so groups
//!   reach the file in sequence order and never interleave.
//! - `settled_through` only grows; every record at or below it reached the file (and was
//!   synced, under `Fsync`), unless it lies in one of `failed_groups`.
//! - Once `poisoned` is set it stays set: no record is appended, written or acknowledged after.
//! - The pending buffer holds at most `pending_bytes_max` bytes, or one record if that record
//!   alone is larger: `append` waits (or flushes the buffer itself) rather than grow it.
//!
//! # Failures
//! - A failed fsync poisons the log: after a failed `fsync` the kernel may have dropped the
//!   dirty pages and marked them clean, so a retry can "succeed" without the data being on disk.
//!   Nothing in the failed group, nor after it, is ever acknowledged.
//! - Any other failed write (EIO, …) poisons the log too: we do not know what reached the disk.
//! - A write that fails with ENOSPC is the one recoverable failure. No fsync failed, so the page
//!   cache still tells the truth; the leader truncates the file back to where the group started
//!   (dropping any part of the group that did land), syncs that truncation, and reports
//!   [`Error::NoSpace`] to every waiter of the group. The file is then byte for byte what it was
//!   before the group, so the next group can go on once space is freed. The truncation is synced
//!   in every mode so that a record reported as failed cannot reappear after a crash. If the
//!   truncation or its sync fails, the log poisons itself. ENOSPC from an fsync is a failed
//!   fsync and poisons.
//! - The same applies to rotation: a new file that cannot be created or given its header for
//!   lack of space is removed again and the group fails with `NoSpace`; the old file stays in use.
//! - Failed groups are remembered (adjacent ones merged) so that a late `wait_durable` still
//!   gets the right answer; after [`FAILED_GROUPS_MAX`] separate disk-full episodes the log
//!   poisons itself instead of forgetting.
//!
//! # Crash analysis
//! - `Fsync`: an acknowledged record was written and `sync_data` returned before the
//!   acknowledgement, in a file whose header and directory entry were synced at creation: it
//!   survives a power loss. A crash mid-group leaves a torn tail that recovery cuts off; none of
//!   its records was acknowledged.
//! - `Os`: an acknowledged record is in the kernel's page cache: it survives the process
//!   crashing, not the machine losing power (then any suffix of the log may be lost, possibly
//!   with holes at file boundaries, which recovery reports).

use super::format;
use super::log_file::{self, LogFile};
use super::{Wal, WalPosition};
use crate::error::{Error, Result};
use crate::fs::is_no_space;
use parking_lot::MutexGuard;
use std::collections::VecDeque;
use std::path::PathBuf;

/// "disk full: group not written", at most every 10 s (writers retry while the disk is full).
static NO_SPACE_LOG: crate::retry::LogLimiter = crate::retry::LogLimiter::new(crate::retry::LOG_INTERVAL);

/// Separate disk-full episodes remembered before the log poisons itself rather than forget one.
pub(crate) const FAILED_GROUPS_MAX: usize = 1024;

/// The shared state of the group commit, behind `Wal::state`.
pub(crate) struct State {
    /// Framed records appended but not yet taken by a leader.
    pending: Vec<u8>,
    /// Sequence of the first record in `pending`.
    pending_first_sequence: u64,
    /// Sequence the next appended record gets.
    next_sequence: u64,
    /// Every record with a sequence up to this one has been dealt with by a leader.
    settled_through: u64,
    /// True while a leader does I/O with the mutex released.
    leader_active: bool,
    /// Why the log stopped, once it has.
    poisoned: Option<String>,
    /// Groups whose write failed with ENOSPC, ascending, adjacent ones merged.
    failed_groups: VecDeque<FailedGroup>,
    /// Id of the file groups are appended to.
    pub(crate) active_file_id: u64,
    /// The previous group's buffer, kept to reuse its allocation.
    spare: Vec<u8>,
}

/// Records `first..=last` were not written because the disk was full, or (`reason` set)
/// because a new log file could not be created (too many open files, say) before anything
/// changed on disk.
struct FailedGroup {
    first: u64,
    last: u64,
    path: PathBuf,
    reason: Option<String>,
}

/// How a group failed.
enum GroupFailure {
    /// Out of space; the file was restored to its state before the group.
    NoSpace(PathBuf),
    /// A new file could not be created and nothing changed on disk: the group fails, the log
    /// goes on with its old file (an exhausted descriptor table is not a reason to stop).
    Retryable(PathBuf, String),
    /// Anything else: the log stops.
    Poison(String),
}

impl State {
    pub(crate) fn new(active_file_id: u64) -> State {
        State {
            pending: Vec::new(),
            pending_first_sequence: 1,
            next_sequence: 1,
            settled_through: 0,
            leader_active: false,
            poisoned: None,
            failed_groups: VecDeque::new(),
            active_file_id,
            spare: Vec::new(),
        }
    }

    /// The outcome of a settled record.
    fn outcome(&self, sequence: u64) -> Result<()> {
        debug_assert!(sequence <= self.settled_through);
        for group in self.failed_groups.iter().rev() {
            if group.last < sequence {
                break;
            }
            if group.first <= sequence {
                return Err(match &group.reason {
                    None => Error::NoSpace { path: group.path.clone() },
                    Some(reason) => Error::Io { path: group.path.clone(), source: std::io::Error::other(reason.clone()) },
                });
            }
        }
        Ok(())
    }

    fn record_failure(&mut self, first: u64, last: u64, path: PathBuf, reason: Option<String>) {
        if let Some(previous) = self.failed_groups.back_mut() {
            if previous.last + 1 == first && previous.reason == reason {
                previous.last = last;
                return;
            }
        }
        self.failed_groups.push_back(FailedGroup { first, last, path, reason });
        if self.failed_groups.len() > FAILED_GROUPS_MAX {
            self.poison(format!("more than {FAILED_GROUPS_MAX} separate disk-full failures"));
        }
    }

    fn poison(&mut self, reason: String) {
        if self.poisoned.is_none() {
            tracing::error!(%reason, "write-ahead log stopped accepting writes");
            self.poisoned = Some(reason);
        }
        self.pending = Vec::new();
        self.pending_first_sequence = self.next_sequence;
    }

    fn check_poisoned(&self) -> Result<()> {
        match &self.poisoned {
            Some(reason) => Err(Error::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }

    /// True when there are framed records not yet taken by a leader.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

impl Wal {
    pub(crate) fn append_record(&self, record: &[u8]) -> Result<WalPosition> {
        let limit = self.options.record_bytes_max.min(format::RECORD_PAYLOAD_MAX);
        if record.len() > limit {
            return Err(Error::RecordTooLarge { len: record.len(), limit });
        }
        let checksum = format::record_checksum(record);
        let framed_len = format::record_len(record.len());
        let mut state = self.state.lock();
        loop {
            state.check_poisoned()?;
            let fits = state.pending.len() + framed_len <= self.options.pending_bytes_max;
            if state.pending.is_empty() || fits {
                break;
            }
            // Backpressure: wait for a leader to take the buffer, or be that leader. Leading
            // ourselves means an appender that never waits cannot block forever. The group's
            // outcome belongs to its waiters; ours is checked on the next loop turn.
            if state.leader_active {
                self.changed.wait(&mut state);
            } else {
                let _ = self.lead(&mut state, false);
            }
        }
        format::encode_record(record, checksum, &mut state.pending);
        let sequence = state.next_sequence;
        state.next_sequence += 1;
        Ok(WalPosition { sequence })
    }

    pub(crate) fn wait_settled(&self, position: WalPosition) -> Result<()> {
        let mut state = self.state.lock();
        assert!(position.sequence < state.next_sequence, "BUG: waiting for position {} that this log never handed out", position.sequence);
        loop {
            if position.sequence <= state.settled_through {
                return state.outcome(position.sequence);
            }
            state.check_poisoned()?;
            if state.leader_active {
                self.changed.wait(&mut state);
            } else {
                // Our record is pending (a finished leader would have settled it), so the group
                // is not empty; errors reach us through `outcome` on the next turn.
                let _ = self.lead(&mut state, false);
            }
        }
    }

    pub(crate) fn rotate_after_pending(&self) -> Result<u64> {
        let mut state = self.state.lock();
        loop {
            state.check_poisoned()?;
            if !state.leader_active {
                break;
            }
            self.changed.wait(&mut state);
        }
        self.lead(&mut state, true)
    }

    /// Takes the pending buffer, writes it as one group (then starts a new file if `rotate`),
    /// and publishes the outcome. Returns the id of the file appended to afterwards.
    pub(crate) fn lead(&self, state: &mut MutexGuard<'_, State>, rotate: bool) -> Result<u64> {
        assert!(!state.leader_active, "BUG: two group-commit leaders at once");
        state.leader_active = true;
        let mut group = std::mem::take(&mut state.spare);
        std::mem::swap(&mut group, &mut state.pending);
        let first = state.pending_first_sequence;
        let last = state.next_sequence - 1;
        state.pending_first_sequence = state.next_sequence;
        // Appenders held back by a full buffer may go on.
        self.changed.notify_all();

        let (active_file_id, written) = MutexGuard::unlocked(state, || {
            let mut active = self.active.lock();
            // A panic here must not leave `leader_active` set (every later waiter would wait
            // for ever): it poisons the log like any failure whose outcome is unknown.
            let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.write_group(&mut active, &group, rotate)))
                .unwrap_or_else(|panic| {
                    let what = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned());
                    Err(GroupFailure::Poison(format!("BUG: group commit panicked: {}", what.unwrap_or_default())))
                });
            (active.id, written)
        });

        group.clear();
        state.spare = group;
        state.leader_active = false;
        state.active_file_id = active_file_id;
        let result = match written {
            Ok(()) => {
                state.settled_through = state.settled_through.max(last);
                Ok(active_file_id)
            }
            Err(GroupFailure::NoSpace(path)) => {
                if first <= last {
                    state.record_failure(first, last, path.clone(), None);
                }
                state.settled_through = state.settled_through.max(last);
                Err(Error::NoSpace { path })
            }
            Err(GroupFailure::Retryable(path, reason)) => {
                if first <= last {
                    state.record_failure(first, last, path.clone(), Some(reason.clone()));
                }
                state.settled_through = state.settled_through.max(last);
                Err(Error::Io { path, source: std::io::Error::other(reason) })
            }
            Err(GroupFailure::Poison(reason)) => {
                state.poison(reason.clone());
                Err(Error::Poisoned(reason))
            }
        };
        self.changed.notify_all();
        result
    }

    fn write_group(&self, active: &mut LogFile, group: &[u8], rotate: bool) -> Result<(), GroupFailure> {
        if !group.is_empty() {
            if active.missing || (active.end_offset >= self.options.file_bytes_max && !active.is_empty()) {
                self.start_next_file(active)?;
            }
            self.append_group(active, group)?;
        }
        if rotate {
            self.start_next_file(active)?;
        }
        Ok(())
    }

    fn append_group(&self, active: &mut LogFile, group: &[u8]) -> Result<(), GroupFailure> {
        let start = active.end_offset;
        let end = start + group.len() as u64;
        let written = active.file.write_all_at(group, start).and_then(|()| self.zero_ahead(active, end));
        let path = &active.path;
        if let Err(error) = written {
            if !is_no_space(&error) {
                return Err(GroupFailure::Poison(format!(
                    "writing {} bytes to {} at offset {start} failed: {error}",
                    group.len(),
                    path.display()
                )));
            }
            // Disk full: cut off whatever part of the group (and of the zeros after it) landed
            // and make the cut durable, so no record of this failed group can come back after
            // a crash.
            active.zeroed_to = start;
            let rollback = active.file.set_len(start).and_then(|()| active.file.sync_data());
            if let Err(error) = rollback {
                return Err(GroupFailure::Poison(format!(
                    "disk full writing {}, then truncating it back to {start} failed: {error}",
                    path.display()
                )));
            }
            if let Some(suppressed) = NO_SPACE_LOG.allow("group not written") {
                tracing::warn!(file = %path.display(), bytes = group.len(), suppressed, "disk full: group not written");
            }
            return Err(GroupFailure::NoSpace(path.clone()));
        }
        if self.sync {
            if let Err(error) = active.file.sync_data() {
                return Err(GroupFailure::Poison(format!("fsync of {} failed: {error}", path.display())));
            }
        }
        active.end_offset = end;
        active.zeroed_to = active.zeroed_to.max(end);
        Ok(())
    }

    /// Under `Fsync`, writes zeros past `end` when fewer than half of [`ZERO_AHEAD_BYTES`] are
    /// left, up to the next multiple of it beyond `end + ZERO_AHEAD_BYTES / 2` (see `log_file`:
    /// later groups then overwrite allocated blocks). The zeros are synced with the group. A
    /// disk too full for them is no failure: what landed is cut off again and the log goes on
    /// appending as it would without zeros ahead.
    fn zero_ahead(&self, active: &mut LogFile, end: u64) -> std::io::Result<()> {
        let step = log_file::ZERO_AHEAD_BYTES;
        if !self.sync || active.zeroed_to >= end + step / 2 {
            return Ok(());
        }
        let from = active.zeroed_to.max(end);
        let to = (end + step / 2).next_multiple_of(step);
        // Up to 1.5 steps when a large group ran past the zeros: written a step at a time.
        let mut written = Ok(());
        let mut at = from;
        while at < to && written.is_ok() {
            let len = (to - at).min(step);
            written = active.file.write_all_at(&log_file::ZEROS[..len as usize], at);
            at += len;
        }
        match written {
            Ok(()) => {
                active.zeroed_to = to;
                Ok(())
            }
            Err(error) if is_no_space(&error) => {
                active.zeroed_to = end;
                active.file.set_len(end)
            }
            Err(error) => Err(error),
        }
    }

    /// Replaces the active file with a new one. The old file needs no sync here: under `Fsync`
    /// every group was synced as it was written.
    fn start_next_file(&self, active: &mut LogFile) -> Result<(), GroupFailure> {
        let id = active.id + 1;
        match log_file::create(&*self.fs, &self.dir, id, self.sync) {
            Ok(file) => {
                tracing::debug!(file = %file.path.display(), "write-ahead log rotated");
                *active = file;
                Ok(())
            }
            Err(failure) => match failure.error {
                Error::NoSpace { path } if failure.clean => Err(GroupFailure::NoSpace(path)),
                Error::Io { path, source } if failure.clean => Err(GroupFailure::Retryable(path, source.to_string())),
                error => Err(GroupFailure::Poison(format!("starting log file {id} failed: {error}"))),
            },
        }
    }
}
