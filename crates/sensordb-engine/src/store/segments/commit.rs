//! Pipelined group commit of the segment store.
//!
//! Concurrent `put_group` calls are merged into flush groups: the first caller to find the
//! staging slot free becomes a group's leader and takes every part waiting. A group is written
//! in two steps. *Staging* writes it into the open segment, all of it but its header page (a zero
//! page stands in its place); it runs while the group before is still syncing, which is what lets
//! the disk write one group while it flushes the other. *Committing* writes the header and
//! fdatasyncs, and starts only once the group before is durable: a group's header on disk is
//! still proof that every group before it was synced, which recovery relies on (it takes damage
//! in any group but the last for decay, not for a torn write; see `scan_segment`).
//!
//! Groups finish in the order they were staged, and a writer is acknowledged only when the
//! fdatasync covering its group has returned. At most [`GROUPS_IN_FLIGHT_MAX`] groups are in
//! flight: one committing, one staged or staging. When a group fails to commit, the groups staged
//! after it fail with the same error: their bytes are cut off with its own, and nothing past the
//! last durable group stays in the open segment.

use super::{SegmentFile, SegmentHandle, SegmentStore, SegmentSummary};
use crate::error::{Error, Result};
use crate::segment::{GroupPart, SegmentWriter, StagedGroup};
use crate::store::BlockLife;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Instant;

/// Groups staged (or staging) and not yet finished, at most.
const GROUPS_IN_FLIGHT_MAX: u64 = 2;

/// The pending parts and the order of the groups in flight. Tickets are handed out in order, so
/// the pending parts always hold the tickets `[taken_before, next_ticket)`.
#[derive(Default)]
pub(super) struct GroupCommit {
    pending: Vec<(GroupPart, u64)>,
    next_ticket: u64,
    /// Every ticket below this is in a group.
    taken_before: u64,
    /// Every ticket below this is finished.
    done_before: u64,
    /// A leader is staging a group, or someone holds the slot to work on the open segment
    /// with no group in flight (sealing it).
    staging: bool,
    /// Groups get turns in the order they are staged and finish in that order.
    next_turn: u64,
    turns_done: u64,
    /// Parts in the group staged last.
    last_group_parts: u64,
    /// Callers waiting for no group to be in flight: no group is staged before they had it.
    drainers_waiting: usize,
    /// Outcomes of groups whose writers have not all read them: tickets `[start, end)` got
    /// `sequence` or an error, and `unread` of them are still to read it (the entry goes with the
    /// last). Bounded by the writers waiting, however late one of them wakes.
    pub(super) outcomes: VecDeque<CommitOutcome>,
}

pub(super) struct CommitOutcome {
    start: u64,
    end: u64,
    outcome: std::result::Result<u64, CommitError>,
    unread: u64,
}

#[derive(Clone, Debug)]
pub(super) enum CommitError {
    NoSpace(PathBuf),
    Other(String),
}

impl From<Error> for CommitError {
    fn from(error: Error) -> Self {
        match error {
            Error::NoSpace { path } => CommitError::NoSpace(path),
            other => CommitError::Other(other.to_string()),
        }
    }
}

impl From<CommitError> for Error {
    fn from(error: CommitError) -> Self {
        match error {
            CommitError::NoSpace(path) => Error::NoSpace { path },
            CommitError::Other(reason) => Error::Poisoned(reason),
        }
    }
}

/// The segments groups are written to: the open one, and the ones filled by a group still in
/// flight (sealed when their last group finishes).
pub(super) struct OpenSegment {
    pub(super) writer: Option<SegmentWriter>,
    closing: Vec<SegmentWriter>,
    pub(super) next_id: u64,
    /// Sequence of the last group staged.
    sequence: u64,
    /// Sequence of the last group committed.
    committed_sequence: u64,
    /// Changes when a group fails to commit: the groups staged before that, in another epoch,
    /// fail too, with `failure`.
    epoch: u64,
    failure: Option<CommitError>,
}

impl OpenSegment {
    pub(super) fn new(next_id: u64, sequence: u64) -> Self {
        OpenSegment { writer: None, closing: Vec::new(), next_id, sequence, committed_sequence: sequence, epoch: 0, failure: None }
    }

    /// Whether segment `id` takes groups or still has groups in flight: never removed.
    pub(super) fn is_open(&self, id: u64) -> bool {
        self.writer.as_ref().is_some_and(|w| w.id() == id) || self.closing.iter().any(|w| w.id() == id)
    }

    fn writer_of(&mut self, id: u64) -> Option<&mut SegmentWriter> {
        self.writer.iter_mut().chain(self.closing.iter_mut()).find(|w| w.id() == id)
    }

    /// Takes out the closing segments with no group in flight, for sealing.
    fn take_finished_closing(&mut self) -> Vec<SegmentWriter> {
        let (finished, busy) = std::mem::take(&mut self.closing).into_iter().partition(|w| w.staged_bytes() == w.bytes());
        self.closing = busy;
        finished
    }
}

/// A group staged in `epoch` (see [`OpenSegment::epoch`]).
pub(super) struct Staged {
    group: StagedGroup,
    epoch: u64,
}

impl SegmentStore {
    /// Group commit of `group` with the others waiting; returns the sequence of the group that
    /// holds it once that group is durable.
    pub(super) fn commit_group(&self, group: crate::segment::GroupBuilder, wal_checkpoint: u64) -> Result<u64> {
        // The copy into page-aligned memory (if any: a builder made for it is aligned already)
        // happens here, in the caller's thread, so that concurrent writers work in parallel and
        // the committing threads only do I/O.
        let part = group.into_part();
        let mut commit = self.commit.lock();
        let ticket = commit.next_ticket;
        commit.next_ticket += 1;
        commit.pending.push((part, wal_checkpoint));
        loop {
            if ticket < commit.done_before {
                let index = commit
                    .outcomes
                    .iter()
                    .position(|o| (o.start..o.end).contains(&ticket))
                    .expect("BUG: a group commit's outcome went before all its writers read it");
                let entry = &mut commit.outcomes[index];
                entry.unread -= 1;
                let outcome = entry.outcome.clone();
                if entry.unread == 0 {
                    commit.outcomes.remove(index);
                }
                return outcome.map_err(Error::from);
            }
            let in_flight = commit.next_turn - commit.turns_done;
            // While a group commits, the next one is staged once as many parts wait as that
            // group holds: staged at once, it would take only the parts of the writers that
            // were quick to come back, and each small group costs a whole fdatasync.
            let enough = in_flight == 0 || commit.pending.len() as u64 >= commit.last_group_parts;
            let may_lead =
                !commit.staging && commit.drainers_waiting == 0 && in_flight < GROUPS_IN_FLIGHT_MAX && !commit.pending.is_empty() && enough;
            if !may_lead {
                self.committed.wait(&mut commit);
                continue;
            }
            commit.staging = true;
            let turn = commit.next_turn;
            commit.next_turn += 1;
            let (start, end) = (commit.taken_before, commit.next_ticket);
            commit.taken_before = end;
            commit.last_group_parts = end - start;
            let batch = std::mem::take(&mut commit.pending);
            drop(commit);
            let checkpoint = batch.iter().map(|(_, c)| *c).max().expect("BUG: leader without a pending group");
            let parts = batch.into_iter().map(|(part, _)| part).collect();
            let staged = self.stage_group(parts, checkpoint);
            commit = self.commit.lock();
            commit.staging = false;
            self.committed.notify_all();
            while commit.turns_done != turn {
                self.committed.wait(&mut commit);
            }
            drop(commit);
            let outcome = staged.map_err(CommitError::from).and_then(|staged| self.finish_group(staged));
            commit = self.commit.lock();
            commit.outcomes.push_back(CommitOutcome { start, end, outcome, unread: end - start });
            commit.done_before = end;
            commit.turns_done += 1;
            self.committed.notify_all();
        }
    }

    /// Runs `work` on the open segments with no group in flight and none staged meanwhile.
    pub(super) fn with_no_group_in_flight<T>(&self, work: impl FnOnce(&mut OpenSegment) -> T) -> T {
        let mut commit = self.commit.lock();
        commit.drainers_waiting += 1;
        while commit.staging || commit.turns_done != commit.next_turn {
            self.committed.wait(&mut commit);
        }
        commit.drainers_waiting -= 1;
        commit.staging = true;
        drop(commit);
        let result = work(&mut self.open.lock());
        let mut commit = self.commit.lock();
        commit.staging = false;
        self.committed.notify_all();
        result
    }

    /// Stages one group in the open segment (creating one as needed); a group that fills the
    /// segment moves it to the closing ones, and the next group goes to a new segment.
    fn stage_group(&self, parts: Vec<GroupPart>, wal_checkpoint: u64) -> Result<Staged> {
        let mut open = self.open.lock();
        if open.writer.is_none() {
            let id = open.next_id;
            let writer = SegmentWriter::create(self.fs.as_ref(), &self.dir, id, self.options.sync)?;
            open.next_id += 1;
            let summary = SegmentSummary::of(id, false, writer.bytes(), &[], 0);
            let handle = SegmentHandle { id, path: writer.path().to_path_buf(), file: writer.file() };
            self.files.write().insert(id, SegmentFile::new(handle, writer.bytes(), summary, &[]));
            open.writer = Some(writer);
            *self.open_since.lock() = Some(Instant::now());
        }
        let sequence = open.sequence + 1;
        let writer = open.writer.as_mut().expect("BUG: open segment vanished");
        let group = writer.stage_parts(parts, sequence, wal_checkpoint)?;
        let full = writer.staged_bytes() >= self.options.segment_bytes_max || writer.staged_blocks() >= self.options.segment_blocks_max;
        open.sequence = sequence;
        if full {
            let writer = open.writer.take().expect("BUG: open segment vanished");
            open.closing.push(writer);
            *self.open_since.lock() = None;
        }
        Ok(Staged { group, epoch: open.epoch })
    }

    /// Commits a staged group once every group before it finished (the caller's turn), and
    /// publishes its blocks; a closing segment whose last group this was is sealed.
    fn finish_group(&self, staged: Staged) -> std::result::Result<u64, CommitError> {
        let Staged { group, epoch } = staged;
        {
            let open = self.open.lock();
            if open.epoch != epoch {
                // A group before this one failed and cut it off.
                return Err(open.failure.clone().unwrap_or(CommitError::Other("an earlier group failed".into())));
            }
        }
        if let Err(e) = group.commit(self.options.sync) {
            let error = CommitError::from(e);
            self.forget_staged(&error);
            return Err(error);
        }
        let id = group.segment();
        let mut open = self.open.lock();
        let writer = open.writer_of(id).expect("BUG: a staged group's segment is not open");
        writer.record(&group);
        let bytes = writer.bytes();
        open.committed_sequence = group.sequence();
        if let Some(file) = self.files.write().get_mut(&id) {
            file.bytes = bytes;
            file.summary.add(group.entries(), bytes, group.wal_checkpoint());
            if let super::SegmentBlocks::Resident(lives) = &mut file.blocks {
                lives.extend(group.entries().iter().map(BlockLife::of));
            }
        }
        self.index.write().resident.insert(id, group.entries());
        let finished = open.take_finished_closing();
        drop(open);
        self.seal_closed(finished);
        Ok(group.sequence())
    }

    /// After a group failed to commit (it is the oldest in flight): every byte staged in an
    /// open segment is its own or a later group's, so all of it is cut off, and the later groups
    /// fail with `error` when their turn comes.
    fn forget_staged(&self, error: &CommitError) {
        let mut open = self.open.lock();
        let open = &mut *open;
        for writer in open.writer.iter_mut().chain(open.closing.iter_mut()) {
            if let Err(e) = writer.unstage() {
                tracing::warn!(error = %e, segment = writer.id(), "could not cut off the groups staged after a failed one");
            }
        }
        open.sequence = open.committed_sequence;
        open.epoch += 1;
        open.failure = Some(error.clone());
        let finished = open.take_finished_closing();
        self.seal_closed(finished);
    }

    /// Seals segments that take no more groups. The groups in them are durable and published
    /// whatever happens here: an unsealed segment is complete, only slower to open (recovery
    /// walks its groups and seals it).
    fn seal_closed(&self, writers: Vec<SegmentWriter>) {
        for writer in writers {
            let id = writer.id();
            match writer.seal() {
                Ok(directory) => self.sealed(id, directory),
                Err(e) => {
                    tracing::warn!(error = %e, segment = id, "sealing failed; the segment stays unsealed until the next start");
                    self.refresh_size(id);
                }
            }
        }
    }

    /// Records a segment just sealed: its size, and its blocks moved to the extent index when
    /// its footer has a series directory.
    fn sealed(&self, id: u64, directory: Option<crate::segment::DirectoryIndex>) {
        self.refresh_size(id);
        if let Some(directory) = directory {
            self.adopt_directory(id, directory);
        }
    }

    /// Seals the open segment, if any; with no group in flight (see
    /// [`SegmentStore::with_no_group_in_flight`]).
    pub(super) fn seal_open(&self, open: &mut OpenSegment) -> Result<()> {
        debug_assert!(open.closing.is_empty(), "BUG: sealing with groups in flight");
        if let Some(writer) = open.writer.take() {
            *self.open_since.lock() = None;
            let id = writer.id();
            let directory = writer.seal()?;
            self.sealed(id, directory);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SegmentStore, SegmentStoreOptions};
    use crate::fs::{CrashFs, CrashMode, DiskSpace, FileSystem, RealFs, StorageFile};
    use crate::model::SeriesId;
    use crate::store::test_groups::group;
    use crate::store::BlockStore;
    use parking_lot::Mutex;
    use std::io;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Duration;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Event {
        /// A write of a group header page (file, sequence).
        Header(u64, u64),
        /// Any other write (file).
        Write(u64),
        Sync(u64),
        /// `put_group` returned this sequence to a writer.
        Ack(u64),
    }

    /// Real files whose writes and syncs are logged in order; syncs take a while, as a disk's
    /// cache flush does, so that groups overlap them.
    struct LoggingFs {
        log: Arc<Mutex<Vec<Event>>>,
        files: Mutex<Vec<PathBuf>>,
    }

    struct LoggingFile {
        inner: Arc<dyn StorageFile>,
        id: u64,
        log: Arc<Mutex<Vec<Event>>>,
    }

    impl StorageFile for LoggingFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
            let event = if buf.len() >= 16 && &buf[..8] == b"SDBGROUP" {
                Event::Header(self.id, u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes")))
            } else {
                Event::Write(self.id)
            };
            // Logged under the lock with the write, so the log order is the order of the writes.
            let mut log = self.log.lock();
            let written = self.inner.write_at(buf, offset);
            log.push(event);
            written
        }
        fn sync_data(&self) -> io::Result<()> {
            std::thread::sleep(Duration::from_millis(3));
            let synced = self.inner.sync_data();
            self.log.lock().push(Event::Sync(self.id));
            synced
        }
        fn len(&self) -> io::Result<u64> {
            self.inner.len()
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.inner.set_len(len)
        }
    }

    impl LoggingFs {
        fn wrap(&self, path: &Path, inner: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
            let mut files = self.files.lock();
            let id = files.iter().position(|p| p == path).unwrap_or_else(|| {
                files.push(path.to_path_buf());
                files.len() - 1
            }) as u64;
            Arc::new(LoggingFile { inner, id, log: self.log.clone() })
        }
    }

    impl FileSystem for LoggingFs {
        fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
            Ok(self.wrap(path, RealFs.create(path)?))
        }
        fn create_for_appends(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
            Ok(self.wrap(path, RealFs.create(path)?))
        }
        fn open_rw(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
            Ok(self.wrap(path, RealFs.open_rw(path)?))
        }
        fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
            RealFs.open_read(path)
        }
        fn remove(&self, path: &Path) -> io::Result<()> {
            RealFs.remove(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            RealFs.rename(from, to)
        }
        fn exists(&self, path: &Path) -> bool {
            RealFs.exists(path)
        }
        fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
            RealFs.list(dir)
        }
        fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
            RealFs.create_dir_all(dir)
        }
        fn sync_dir(&self, dir: &Path) -> io::Result<()> {
            RealFs.sync_dir(dir)
        }
        fn space(&self, dir: &Path) -> io::Result<DiskSpace> {
            RealFs.space(dir)
        }
    }

    /// The order pipelining must keep: a writer hears of its group only after an fdatasync of
    /// the group's segment that followed the group's header; a group's header is written only
    /// after the group before it was synced (recovery's proof); and a group is staged while the
    /// one before it syncs (the point of the pipeline).
    #[test]
    fn acknowledgements_follow_the_sync_covering_them_and_headers_follow_the_previous_sync() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Arc::new(Mutex::new(Vec::new()));
        let fs = Arc::new(LoggingFs { log: log.clone(), files: Mutex::new(Vec::new()) });
        // Small segments: groups also cross from a filled segment to a new one.
        let options = SegmentStoreOptions { segment_bytes_max: 64 << 10, sync: true, ..SegmentStoreOptions::default() };
        let (store, _) = SegmentStore::open(fs, dir.path(), options).expect("open");
        std::thread::scope(|scope| {
            for w in 0..4u32 {
                let (store, log) = (&store, &log);
                scope.spawn(move || {
                    for i in 0..25i64 {
                        let sequence = store.put_group(group(w + 1, i * 10, 10), 0).expect("committed");
                        log.lock().push(Event::Ack(sequence));
                    }
                });
            }
        });
        let log = log.lock().clone();
        let header_at = |sequence: u64| {
            log.iter()
                .position(|e| matches!(e, Event::Header(_, s) if *s == sequence))
                .unwrap_or_else(|| panic!("no header for {sequence}"))
        };
        // Where the group's fdatasync returned: the first sync of its file after its header.
        let synced_at = |sequence: u64| {
            let at = header_at(sequence);
            let Event::Header(file, _) = log[at] else { unreachable!() };
            at + log[at..].iter().position(|e| *e == Event::Sync(file)).unwrap_or_else(|| panic!("group {sequence} never synced"))
        };
        let acks: Vec<(usize, u64)> =
            log.iter().enumerate().filter_map(|(at, e)| if let Event::Ack(s) = e { Some((at, *s)) } else { None }).collect();
        assert_eq!(acks.len(), 100);
        for &(at, sequence) in &acks {
            assert!(synced_at(sequence) < at, "group {sequence} acknowledged before its fdatasync: {log:?}");
        }
        let last = acks.iter().map(|(_, s)| *s).max().expect("acks");
        let mut overlapped = 0;
        for sequence in 2..=last {
            let previous_synced = synced_at(sequence - 1);
            assert!(header_at(sequence) > previous_synced, "header of {sequence} before group {} was durable", sequence - 1);
            // The zero page a staged group starts with comes right before its blocks: any write
            // of the group's file between the previous header and its sync is staging.
            let previous_header = header_at(sequence - 1);
            let Event::Header(file, _) = log[header_at(sequence)] else { unreachable!() };
            if log[previous_header..previous_synced].contains(&Event::Write(file)) {
                overlapped += 1;
            }
        }
        assert!(overlapped > 0, "no group was staged while the one before it synced");
    }

    /// Writers on several threads, the power lost at many points: every group a writer was
    /// told is committed survives every way the disk may have kept the unsynced writes, and
    /// every block the reopened store indexes reads back intact (no torn group is taken in).
    #[test]
    fn a_power_loss_keeps_every_acknowledged_group_and_indexes_no_torn_one() {
        let root = PathBuf::from("/crash-root");
        let dir = root.join("segments");
        let options = SegmentStoreOptions { segment_bytes_max: 48 << 10, sync: true, ..SegmentStoreOptions::default() };
        let run = |fs: &CrashFs| -> Vec<(u32, i64)> {
            // The power may go out while the store opens: then nothing was acknowledged.
            let Ok((store, _)) = SegmentStore::open(Arc::new(fs.clone()), &dir, options.clone()) else { return Vec::new() };
            let acked = Mutex::new(Vec::new());
            std::thread::scope(|scope| {
                for w in 0..3u32 {
                    let (store, acked) = (&store, &acked);
                    scope.spawn(move || {
                        for i in 0..20i64 {
                            if store.put_group(group(w + 1, i * 10, 10), 0).is_err() {
                                return;
                            }
                            acked.lock().push((w + 1, i * 10));
                        }
                    });
                }
            });
            acked.into_inner()
        };
        let whole = CrashFs::new(&root);
        assert_eq!(run(&whole).len(), 60);
        let operations = whole.operations();
        let mut checked = 0;
        for point in (5..operations).step_by((operations / 24).max(1) as usize) {
            let fs = CrashFs::new(&root);
            fs.crash_at(Some(point));
            let acked = run(&fs);
            for mode in CrashMode::ALL {
                for seed in 0..3u64 {
                    let image = fs.crash_image(mode, seed ^ point);
                    let (store, _) = SegmentStore::open(Arc::new(image), &dir, options.clone()).expect("recovery");
                    for &(series, start) in &acked {
                        let blocks = store.blocks(SeriesId(series), start, start + 9);
                        assert!(
                            blocks.iter().any(|b| b.block.entry.min_timestamp == start && b.block.entry.count == 10),
                            "crash at {point}, {mode:?}, seed {seed}: acknowledged group of series {series} at {start} lost"
                        );
                    }
                    for series in 1..=3 {
                        for listed in store.blocks(SeriesId(series), i64::MIN, i64::MAX) {
                            let block = store.read_indexed_block(&listed.block);
                            assert!(
                                block.is_ok(),
                                "crash at {point}, {mode:?}, seed {seed}: a damaged block indexed: {block:?}",
                                block = block.err()
                            );
                        }
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked >= 24 * 4 * 3 / 2, "{checked} images checked");
    }
}
