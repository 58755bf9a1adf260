//! The completed-transaction log: which (client id, transaction id) pairs were completed
//! recently, so a retried transaction whose COMPLETED answer was lost is answered again without
//! writing its points a second time. Kept in memory, and durably in the engine's WAL and in
//! `<data_dir>/transactions.log`.
//!
//! File (version 1), all integers little-endian:
//! ```text
//! header, 16 bytes:  "SDBTXLOG" | u16 version (1) | u16 reserved (0) | u32 CRC32C of bytes 0..12
//! record, 52 bytes:  [16] client id | [16] transaction id | i64 completed at (Unix ns) |
//!                    u64 points | u32 CRC32C of the record's first 48 bytes
//! ```
//! At open a torn tail is cut, a record with a bad checksum is skipped (reported), and records
//! outside the window are dropped. The window keeps the newest [`TxLogOptions::max_entries`] ids
//! no older than [`TxLogOptions::max_age`]; the file is rewritten (temporary file, fsync, rename,
//! fsync of the directory) when it holds more than twice the live records plus
//! [`COMPACT_SLACK`], and at open when anything expired or was damaged.
//!
//! # Where a completion is made durable: one fdatasync per commit group
//! When the engine keeps a WAL (`Engine::logs_marks`, durability `os` or `fsync`), a completed
//! id travels as a completion mark ([`TxMark`]) in the WAL record of the transaction's points
//! (`Engine::write_with_marks`): points and id become durable in the same group commit, one
//! fdatasync, and the id is then only remembered in memory here ([`TxLog::remember_all`]); the
//! file is not touched on the commit path. The file is the checkpoint of the ids whose WAL files
//! are trimmed: this log is the engine's [`MarkSink`], and every flush hands it the marks of the
//! flushed memtable ([`MarkSink::checkpoint`]: append, fdatasync under `fsync`) *before* the
//! flush stores its segment group, whose WAL checkpoint is what lets the WAL files go. At start
//! the server registers the sink, then takes `Engine::unflushed_marks` (the marks WAL replay
//! found, and any carried forward by flushes that ran before a sink was registered).
//!
//! Crash analysis (durability `fsync`; under `os` the same holds for a process crash):
//! - When COMPLETED is sent, the WAL record holding the points and the id has been fdatasynced.
//!   A crash before the next flush: WAL replay finds the mark, the retry is answered as already
//!   completed.
//! - A flush: (1) the memtable and its marks are frozen and the WAL rotated; (2) the marks are
//!   appended here and synced; (3) the segment group with the new WAL checkpoint is stored; (4)
//!   the covered WAL files are deleted. A crash before (2) ends: the WAL still holds the marks.
//!   Between (2) and (3): the marks are both here and in the WAL, replayed again (remembering an
//!   id twice is harmless). After (3), whether or not (4) ran (recovery deletes covered files):
//!   the marks are here. No moment leaves a mark in neither place.
//! - A flush before a sink is registered (at start-up) carries the marks forward: it appends
//!   them again to the new WAL file, synced, before (3).
//! - If (2) fails (disk error), the flush goes on and the failure is logged: the points are
//!   stored, and until the next restart this process still answers retries from memory; after a
//!   crash a retry would write the same points again, which stores nothing twice (a repeated
//!   (series, timestamp) keeps one value, here the same). The same as a failed append before.
//!
//! Without a WAL (durability `none`), completions are appended here after the points are
//! written ([`TxLog::record_all`]), unsynced, as before: nothing is durable in that mode anyway.
//! With `sync`, [`TxLog::record_all`] and checkpoints fdatasync (group-committed across
//! concurrent callers).
//!
//! Zeros ahead: with `sync`, the file is kept written with zeros up to [`ZERO_AHEAD_BYTES`] past
//! its last record (extended a step at a time, synced with the records), so an append overwrites
//! allocated blocks inside the file's size and its fdatasync writes only data, not the inode
//! (the same measure as the engine's WAL; see `sensordb_engine::wal`). At open, whole records of
//! zeros at the end are that tail, the clean end of the log, not damage (a record of zeros never
//! has a valid checksum).
//!
//! Ordering: data first, id second, in both modes (in the WAL the id is in the data's own
//! record). A crash between the two leaves durable points whose id is not recorded; the client's
//! retry then writes the same points again, which stores nothing twice.
//!
//! Over 600 lines with its tests: the file format, the window and the two ways ids become
//! durable share the one state and its locks; splitting them would expose that state.

use parking_lot::Mutex;
use sensordb_engine::{MarkSink, TxMark};
use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

pub const FILE_NAME: &str = "transactions.log";
const MAGIC: &[u8; 8] = b"SDBTXLOG";
const VERSION: u16 = 1;
const HEADER_LEN: usize = 16;
const RECORD_LEN: usize = 52;
/// Records beyond twice the live ones tolerated before a rewrite.
pub const COMPACT_SLACK: usize = 65_536;
/// How far ahead of its records a synced log is kept written with zeros, and the step it is
/// extended by (about 5,000 records).
pub const ZERO_AHEAD_BYTES: u64 = 256 << 10;
static ZEROS: [u8; ZERO_AHEAD_BYTES as usize] = [0; ZERO_AHEAD_BYTES as usize];

/// (client id, transaction id).
pub type TxKey = ([u8; 16], [u8; 16]);

/// The window of remembered ids.
#[derive(Clone, Debug)]
pub struct TxLogOptions {
    pub max_entries: usize,
    pub max_age: Duration,
    /// fdatasync every record before the completion is answered.
    pub sync: bool,
}

impl Default for TxLogOptions {
    fn default() -> Self {
        TxLogOptions { max_entries: 1_000_000, max_age: Duration::from_secs(24 * 3600), sync: true }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    at_ns: i64,
    points: u64,
}

#[derive(Default)]
struct State {
    known: HashMap<TxKey, Entry>,
    order: VecDeque<(i64, TxKey)>,
    in_progress: HashMap<TxKey, watch::Receiver<()>>,
}

struct FileState {
    file: Arc<File>,
    records: usize,
    written_seq: u64,
    /// Where the next record goes: the end of the last one.
    end: u64,
    /// The file holds zeros from `end` up to here.
    zeroed_to: u64,
}

/// What opening found.
#[derive(Clone, Debug, Default)]
pub struct TxLogReport {
    pub loaded: usize,
    pub expired: usize,
    pub damaged: usize,
    pub torn_tail_bytes: u64,
}

/// The completed-transaction window, in memory and on disk.
pub struct TxLog {
    path: PathBuf,
    options: TxLogOptions,
    state: Mutex<State>,
    file: Mutex<FileState>,
    synced_seq: Mutex<u64>,
    /// fdatasyncs of the file by appends (not rewrites): what completions cost in syncs here.
    appends_synced: AtomicU64,
}

/// The outcome of [`TxLog::begin`].
pub enum Begin {
    /// Completed before, with this many points.
    Known(u64),
    /// This caller completes it; others asking meanwhile wait for the guard to go.
    Started(CompletionGuard),
}

/// Held while one connection writes a transaction; dropping it without [`CompletionGuard::record`]
/// lets a waiting retry write instead.
pub struct CompletionGuard {
    log: Arc<TxLog>,
    key: TxKey,
    _done: watch::Sender<()>,
}

pub fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&h[..12]);
    h[12..].copy_from_slice(&crc.to_le_bytes());
    h
}

fn encode_record(key: &TxKey, entry: Entry) -> [u8; RECORD_LEN] {
    let mut r = [0u8; RECORD_LEN];
    r[..16].copy_from_slice(&key.0);
    r[16..32].copy_from_slice(&key.1);
    r[32..40].copy_from_slice(&entry.at_ns.to_le_bytes());
    r[40..48].copy_from_slice(&entry.points.to_le_bytes());
    let crc = crc32c::crc32c(&r[..48]);
    r[48..].copy_from_slice(&crc.to_le_bytes());
    r
}

fn decode_record(r: &[u8]) -> Option<(TxKey, Entry)> {
    let crc = u32::from_le_bytes(r[48..52].try_into().ok()?);
    if crc32c::crc32c(&r[..48]) != crc {
        return None;
    }
    let mut client = [0u8; 16];
    let mut tx = [0u8; 16];
    client.copy_from_slice(&r[..16]);
    tx.copy_from_slice(&r[16..32]);
    let at_ns = i64::from_le_bytes(r[32..40].try_into().ok()?);
    let points = u64::from_le_bytes(r[40..48].try_into().ok()?);
    Some(((client, tx), Entry { at_ns, points }))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl State {
    /// Remembers `key` unless it is known already (a mark found both in the file and in the WAL,
    /// say): the first completion counts.
    fn insert(&mut self, key: TxKey, entry: Entry, options: &TxLogOptions) {
        if self.known.contains_key(&key) {
            return;
        }
        self.known.insert(key, entry);
        self.order.push_back((entry.at_ns, key));
        self.expire(options, now_ns());
    }

    fn expire(&mut self, options: &TxLogOptions, now: i64) -> usize {
        let oldest = now.saturating_sub(options.max_age.as_nanos() as i64);
        let mut dropped = 0;
        while let Some(&(at, key)) = self.order.front() {
            if self.order.len() <= options.max_entries && at >= oldest {
                break;
            }
            self.order.pop_front();
            if self.known.get(&key).is_some_and(|e| e.at_ns == at) {
                self.known.remove(&key);
            }
            dropped += 1;
        }
        dropped
    }
}

/// Damage in `<dir>/transactions.log` as [`TxLog::open`] would meet it, without changing
/// anything (for `sensordb inspect`): (offset, what) for each damaged spot; empty when the file
/// is sound or absent.
pub fn verify(dir: &Path) -> io::Result<Vec<(u64, String)>> {
    let bytes = match std::fs::read(dir.join(FILE_NAME)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    if bytes.len() < HEADER_LEN {
        // Torn while being created: the next open writes a fresh header.
        return Ok(if bytes.is_empty() { Vec::new() } else { vec![(0, format!("header torn: {} of {HEADER_LEN} bytes", bytes.len()))] });
    }
    if bytes[..HEADER_LEN] != header() {
        return Ok(vec![(0, "bad header (magic, version or checksum); the server does not start over it".to_string())]);
    }
    let body = &bytes[HEADER_LEN..];
    // The same reading as `open`: whole records of zeros at the end are the zeros written ahead.
    let data = body.iter().rposition(|&b| b != 0).map_or(0, |last| (last + 1).next_multiple_of(RECORD_LEN).min(body.len()));
    let whole = data / RECORD_LEN * RECORD_LEN;
    let mut problems: Vec<(u64, String)> = body[..whole]
        .chunks_exact(RECORD_LEN)
        .enumerate()
        .filter(|(_, chunk)| decode_record(chunk).is_none())
        .map(|(i, _)| ((HEADER_LEN + i * RECORD_LEN) as u64, "damaged record (checksum); the next start drops it".to_string()))
        .collect();
    if whole != data {
        problems.push(((HEADER_LEN + whole) as u64, "torn record at the end; the next start cuts it".to_string()));
    }
    Ok(problems)
}

impl TxLog {
    /// Opens (creating if needed) `<dir>/transactions.log` and loads the window. Blocking.
    pub fn open(dir: &Path, options: TxLogOptions) -> io::Result<(Arc<TxLog>, TxLogReport)> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE_NAME);
        let mut report = TxLogReport::default();
        let mut state = State::default();
        let mut records = 0usize;
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut end = HEADER_LEN as u64;
        if bytes.len() < HEADER_LEN {
            // New, or torn while being created: nothing was ever recorded in it.
            file.set_len(0)?;
            file.write_all(&header())?;
            if options.sync {
                file.write_all(&ZEROS[HEADER_LEN..])?;
            }
            file.sync_all()?;
            sync_dir(dir)?;
        } else {
            if bytes[..HEADER_LEN] != header() {
                let found = u16::from_le_bytes([bytes[8], bytes[9]]);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: bad header (magic or checksum), or unsupported version {found}", path.display()),
                ));
            }
            let body = &bytes[HEADER_LEN..];
            // Whole records of zeros at the end are the zeros written ahead: the clean end.
            let data = body.iter().rposition(|&b| b != 0).map_or(0, |last| (last + 1).next_multiple_of(RECORD_LEN).min(body.len()));
            let body = &body[..data];
            let whole = body.len() / RECORD_LEN * RECORD_LEN;
            for (i, chunk) in body[..whole].chunks_exact(RECORD_LEN).enumerate() {
                match decode_record(chunk) {
                    Some((key, entry)) => {
                        state.known.insert(key, entry);
                        state.order.push_back((entry.at_ns, key));
                        records += 1;
                    }
                    None => {
                        report.damaged += 1;
                        tracing::warn!(path = %path.display(), offset = HEADER_LEN + i * RECORD_LEN, "damaged completed-transaction record skipped");
                    }
                }
            }
            if whole != body.len() {
                report.torn_tail_bytes = (body.len() - whole) as u64;
                tracing::warn!(path = %path.display(), offset = HEADER_LEN + whole, "torn tail of the completed-transaction log cut");
            }
            if HEADER_LEN + whole != bytes.len() {
                // A torn record or zeros ahead: appends continue right after the last whole
                // record (zeros ahead are written again as needed).
                file.set_len((HEADER_LEN + whole) as u64)?;
                file.sync_all()?;
            }
            end = (HEADER_LEN + whole) as u64;
        }
        // Records are appended in completion order, which is time order up to clock steps.
        state.order.make_contiguous().sort_by_key(|(at, _)| *at);
        report.expired = state.expire(&options, now_ns());
        report.loaded = state.known.len();
        let log = Arc::new(TxLog {
            path,
            options,
            state: Mutex::new(state),
            file: Mutex::new(FileState { file: Arc::new(file), records, written_seq: 0, end, zeroed_to: end }),
            synced_seq: Mutex::new(0),
            appends_synced: AtomicU64::new(0),
        });
        if log.needs_compaction() || report.damaged > 0 || report.expired > 0 {
            log.compact()?;
        }
        Ok((log, report))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remembered ids now.
    pub fn len(&self) -> usize {
        self.state.lock().known.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// fdatasyncs of the file by appends so far (completions without a WAL, checkpoints).
    pub fn appends_synced(&self) -> u64 {
        self.appends_synced.load(Ordering::Relaxed)
    }

    /// Remembers completions found elsewhere (the engine's unflushed marks, at start), in
    /// memory only: they are durable where they were found. Expired ones are dropped.
    pub fn remember(&self, marks: &[TxMark]) {
        let mut state = self.state.lock();
        for mark in marks {
            state.insert((mark.client, mark.tx), Entry { at_ns: mark.completed_at_ns, points: mark.points }, &self.options);
        }
    }

    /// The points of a completed transaction, if it is in the window.
    pub fn lookup(&self, key: &TxKey) -> Option<u64> {
        self.state.lock().known.get(key).map(|e| e.points)
    }

    /// Either the earlier completion of `key` or the right to complete it now; waits while
    /// another connection is completing the same key.
    pub async fn begin(self: &Arc<Self>, key: TxKey) -> Begin {
        loop {
            let mut waiting = match self.begin_or_wait(key) {
                Ok(begun) => return begun,
                Err(waiting) => waiting,
            };
            // Returns an error once the guard's sender is dropped.
            while waiting.changed().await.is_ok() {}
        }
    }

    /// [`TxLog::begin`] without waiting: `None` while another connection is completing `key`.
    pub fn try_begin(self: &Arc<Self>, key: TxKey) -> Option<Begin> {
        self.begin_or_wait(key).ok()
    }

    fn begin_or_wait(self: &Arc<Self>, key: TxKey) -> Result<Begin, watch::Receiver<()>> {
        let mut state = self.state.lock();
        if let Some(entry) = state.known.get(&key) {
            return Ok(Begin::Known(entry.points));
        }
        match state.in_progress.get(&key) {
            Some(receiver) => Err(receiver.clone()),
            None => {
                let (done, receiver) = watch::channel(());
                state.in_progress.insert(key, receiver);
                Ok(Begin::Started(CompletionGuard { log: self.clone(), key, _done: done }))
            }
        }
    }

    fn needs_compaction(&self) -> bool {
        let live = self.state.lock().known.len();
        self.file.lock().records > 2 * live + COMPACT_SLACK
    }

    /// Appends `count` encoded records with one write and makes them durable (per options).
    /// Blocking.
    fn append(&self, records: &[u8], count: usize) -> io::Result<()> {
        debug_assert_eq!(records.len(), count * RECORD_LEN);
        let seq = {
            let mut file = self.file.lock();
            let end = file.end + records.len() as u64;
            file.file.write_all_at(records, file.end)?;
            file.end = end;
            file.zeroed_to = file.zeroed_to.max(end);
            if self.options.sync && file.zeroed_to < end + ZERO_AHEAD_BYTES / 2 {
                let to = (end + ZERO_AHEAD_BYTES / 2).next_multiple_of(ZERO_AHEAD_BYTES);
                // Up to 1.5 steps (after a rewrite, say): written a step at a time.
                let mut written = Ok(());
                while file.zeroed_to < to && written.is_ok() {
                    let len = (to - file.zeroed_to).min(ZERO_AHEAD_BYTES);
                    written = file.file.write_all_at(&ZEROS[..len as usize], file.zeroed_to);
                    if written.is_ok() {
                        file.zeroed_to += len;
                    }
                }
                match written {
                    Ok(()) => {}
                    // No room for zeros ahead is no failure: appends extend the file as before.
                    Err(error) if error.raw_os_error() == Some(28) => {
                        file.file.set_len(end)?;
                        file.zeroed_to = end;
                    }
                    Err(error) => return Err(error),
                }
            }
            file.records += count;
            file.written_seq += 1;
            file.written_seq
        };
        if self.options.sync {
            // Group commit: one fdatasync covers every record written before it started.
            let mut synced = self.synced_seq.lock();
            if *synced < seq {
                let (target, handle) = {
                    let file = self.file.lock();
                    (file.written_seq, file.file.clone())
                };
                handle.sync_data()?;
                self.appends_synced.fetch_add(1, Ordering::Relaxed);
                *synced = target;
            }
        }
        Ok(())
    }

    /// Rewrites the file with the live window only. Blocking.
    fn compact(&self) -> io::Result<()> {
        let _sync = self.synced_seq.lock();
        let mut file = self.file.lock();
        let records: Vec<[u8; RECORD_LEN]> = {
            let state = self.state.lock();
            state
                .order
                .iter()
                .filter(|(at, key)| state.known.get(key).is_some_and(|e| e.at_ns == *at))
                .map(|(_, key)| encode_record(key, state.known[key]))
                .collect()
        };
        let temporary = self.path.with_extension("log.tmp");
        let mut out = File::create(&temporary)?;
        let mut bytes = Vec::with_capacity(HEADER_LEN + records.len() * RECORD_LEN);
        bytes.extend_from_slice(&header());
        records.iter().for_each(|r| bytes.extend_from_slice(r));
        out.write_all(&bytes)?;
        out.sync_all()?;
        std::fs::rename(&temporary, &self.path)?;
        if let Some(dir) = self.path.parent() {
            sync_dir(dir)?;
        }
        let reopened = OpenOptions::new().write(true).open(&self.path)?;
        file.file = Arc::new(reopened);
        file.records = records.len();
        file.end = bytes.len() as u64;
        file.zeroed_to = file.end;
        Ok(())
    }
}

impl CompletionGuard {
    /// Records the completion durably, after the transaction's points are durable. Blocking.
    /// (Without a WAL; with one, see [`CompletionGuard::mark`].)
    pub fn record(self, points: u64) -> io::Result<()> {
        let log = self.log.clone();
        log.record_all(vec![(self, points)])
    }

    /// The completion mark to write with the transaction's points, completed at `at_ns`.
    pub fn key(&self) -> TxKey {
        self.key
    }

    pub fn mark(&self, points: u64, at_ns: i64) -> TxMark {
        TxMark { client: self.key.0, tx: self.key.1, completed_at_ns: at_ns, points }
    }
}

impl TxLog {
    /// Records completions (each guard with its points) durably with one append and one sync,
    /// after their points are durable. Blocking.
    pub fn record_all(&self, completed: Vec<(CompletionGuard, u64)>) -> io::Result<()> {
        if completed.is_empty() {
            return Ok(());
        }
        let at_ns = now_ns();
        let mut records = Vec::with_capacity(completed.len() * RECORD_LEN);
        for (guard, points) in &completed {
            assert!(std::ptr::eq(Arc::as_ptr(&guard.log), self), "BUG: a completion guard of another log");
            records.extend_from_slice(&encode_record(&guard.key, Entry { at_ns, points: *points }));
        }
        let written = self.append(&records, completed.len());
        {
            // Remembered in memory even if the file failed: this process still answers retries.
            // Before the guards go, so a retry waiting for one finds the id known.
            let mut state = self.state.lock();
            for (guard, points) in &completed {
                state.insert(guard.key, Entry { at_ns, points: *points }, &self.options);
            }
        }
        drop(completed);
        written?;
        if self.needs_compaction() {
            self.compact()?;
        }
        Ok(())
    }
}

impl TxLog {
    /// Remembers completions whose marks were written durably with their points (the WAL
    /// carries them until a flush checkpoints them here), in memory only: no file I/O. Before
    /// the guards go, so a retry waiting for one finds the id known.
    pub fn remember_all(&self, completed: Vec<(CompletionGuard, TxMark)>) {
        let mut state = self.state.lock();
        for (guard, mark) in &completed {
            assert!(std::ptr::eq(Arc::as_ptr(&guard.log), self), "BUG: a completion guard of another log");
            debug_assert_eq!(guard.key, (mark.client, mark.tx));
            state.insert(guard.key, Entry { at_ns: mark.completed_at_ns, points: mark.points }, &self.options);
        }
        drop(state);
        drop(completed);
    }
}

/// The engine's flushes hand over the marks of the data they store, before the WAL files that
/// held them go: appended (and synced, with `sync`) here. Called on the engine's flush thread.
impl MarkSink for TxLog {
    fn checkpoint(&self, marks: &[TxMark]) -> io::Result<()> {
        let oldest = now_ns().saturating_sub(self.options.max_age.as_nanos() as i64);
        let mut records = Vec::with_capacity(marks.len() * RECORD_LEN);
        let mut count = 0;
        {
            let mut state = self.state.lock();
            for mark in marks.iter().filter(|mark| mark.completed_at_ns >= oldest) {
                let (key, entry) = ((mark.client, mark.tx), Entry { at_ns: mark.completed_at_ns, points: mark.points });
                records.extend_from_slice(&encode_record(&key, entry));
                count += 1;
                state.insert(key, entry, &self.options);
            }
        }
        if count == 0 {
            return Ok(());
        }
        self.append(&records, count)?;
        if self.needs_compaction() {
            self.compact()?;
        }
        Ok(())
    }
}

impl Drop for CompletionGuard {
    fn drop(&mut self) {
        self.log.state.lock().in_progress.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> TxKey {
        ([1; 16], [n; 16])
    }

    async fn complete(log: &Arc<TxLog>, k: TxKey, points: u64) {
        match log.begin(k).await {
            Begin::Started(guard) => guard.record(points).expect("recorded"),
            Begin::Known(_) => panic!("already known"),
        }
    }

    #[tokio::test]
    async fn verify_names_damaged_and_torn_records_and_changes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = TxLog::open(dir.path(), TxLogOptions { sync: false, ..TxLogOptions::default() }).expect("open");
        for n in 0..3u8 {
            complete(&log, key(n), 1).await;
        }
        drop(log);
        assert!(verify(dir.path()).expect("verify").is_empty(), "a sound log");
        let path = dir.path().join(FILE_NAME);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[HEADER_LEN + RECORD_LEN + 5] ^= 0x5a;
        bytes.extend_from_slice(&[7u8; 20]);
        std::fs::write(&path, &bytes).expect("write");
        let offsets: Vec<u64> = verify(dir.path()).expect("verify").into_iter().map(|(offset, _)| offset).collect();
        assert_eq!(offsets, vec![(HEADER_LEN + RECORD_LEN) as u64, (HEADER_LEN + 3 * RECORD_LEN) as u64]);
        assert_eq!(std::fs::read(&path).expect("read"), bytes, "verify changes nothing");
        bytes[9] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        assert_eq!(verify(dir.path()).expect("verify").len(), 1, "a bad header is one problem at offset 0");
    }

    #[tokio::test]
    async fn completions_survive_reopening_and_torn_tails_are_cut() {
        let dir = tempfile::tempdir().expect("tempdir");
        let unsynced = TxLogOptions { sync: false, ..TxLogOptions::default() };
        let (log, _) = TxLog::open(dir.path(), unsynced.clone()).expect("open");
        complete(&log, key(1), 10).await;
        complete(&log, key(2), 20).await;
        assert!(matches!(log.begin(key(1)).await, Begin::Known(10)));
        drop(log);
        let path = dir.path().join(FILE_NAME);
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), (HEADER_LEN + 2 * RECORD_LEN) as u64, "no zeros ahead without sync");
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(&[7u8; 20]).expect("torn tail");
        drop(file);
        let (log, report) = TxLog::open(dir.path(), unsynced).expect("reopen");
        assert_eq!((report.loaded, report.torn_tail_bytes), (2, 20));
        assert_eq!(log.lookup(&key(2)), Some(20));
        assert_eq!(log.lookup(&key(3)), None);
    }

    #[tokio::test]
    async fn a_synced_log_keeps_zeros_ahead_that_read_back_as_its_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        let (log, _) = TxLog::open(dir.path(), TxLogOptions::default()).expect("open");
        for n in 0..3u8 {
            complete(&log, key(n), u64::from(n) + 1).await;
        }
        let records_end = (HEADER_LEN + 3 * RECORD_LEN) as u64;
        let len = std::fs::metadata(&path).expect("stat").len();
        assert_eq!(len, ZERO_AHEAD_BYTES, "zeros ahead, whole steps");
        assert!(std::fs::read(&path).expect("read")[records_end as usize..].iter().all(|&b| b == 0));
        drop(log);

        // Reopened: every id, no damage reported, appends go on right after the records.
        let (log, report) = TxLog::open(dir.path(), TxLogOptions::default()).expect("reopen");
        assert_eq!((report.loaded, report.damaged, report.torn_tail_bytes), (3, 0, 0));
        complete(&log, key(9), 90).await;
        drop(log);
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(decode_record(&bytes[records_end as usize..][..RECORD_LEN]).map(|(k, e)| (k, e.points)), Some((key(9), 90)));

        // A crash that tore the next record inside the zeros: it is skipped and reported, the
        // ids before it stay.
        let file = OpenOptions::new().write(true).open(&path).expect("open");
        file.write_all_at(&[7u8; 20], records_end + RECORD_LEN as u64).expect("torn record");
        drop(file);
        let (log, report) = TxLog::open(dir.path(), TxLogOptions::default()).expect("reopen");
        assert_eq!((report.loaded, report.damaged), (4, 1));
        assert_eq!(log.lookup(&key(9)), Some(90));
    }

    #[tokio::test]
    async fn the_window_is_bounded_and_the_file_compacted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = TxLogOptions { max_entries: 10, max_age: Duration::from_secs(3600), sync: false };
        let (log, _) = TxLog::open(dir.path(), options.clone()).expect("open");
        for n in 0..100u8 {
            complete(&log, key(n), u64::from(n)).await;
        }
        assert_eq!(log.len(), 10);
        assert_eq!(log.lookup(&key(5)), None);
        assert_eq!(log.lookup(&key(99)), Some(99));
        drop(log);
        let (log, report) = TxLog::open(dir.path(), options).expect("reopen");
        assert_eq!(report.loaded, 10);
        assert_eq!(log.lookup(&key(95)), Some(95));
        let len = std::fs::metadata(dir.path().join(FILE_NAME)).expect("stat").len();
        assert_eq!(len, (HEADER_LEN + 10 * RECORD_LEN) as u64, "compacted at open");
    }

    #[tokio::test]
    async fn a_rewritten_synced_log_keeps_its_zeros_ahead() {
        // 2,600 live records after the rewrite end 0.52 of a step past a multiple of it: the
        // next append writes more than one step of zeros at once.
        let dir = tempfile::tempdir().expect("tempdir");
        let options = TxLogOptions { max_entries: 2600, ..TxLogOptions::default() };
        let (log, _) = TxLog::open(dir.path(), options.clone()).expect("open");
        let mut guards = Vec::new();
        for n in 0..3000u32 {
            let mut tx = [0u8; 16];
            tx[..4].copy_from_slice(&n.to_le_bytes());
            let Begin::Started(guard) = log.begin(([2; 16], tx)).await else { panic!("new key") };
            guards.push((guard, 1));
        }
        log.record_all(guards).expect("recorded");
        drop(log);
        let (log, report) = TxLog::open(dir.path(), options.clone()).expect("reopen");
        assert_eq!((report.loaded, report.expired), (2600, 400), "rewritten at open");
        let path = dir.path().join(FILE_NAME);
        let records_end = (HEADER_LEN + 2600 * RECORD_LEN) as u64;
        assert!(records_end % ZERO_AHEAD_BYTES > ZERO_AHEAD_BYTES / 2);
        complete(&log, key(7), 70).await;
        let len = std::fs::metadata(&path).expect("stat").len();
        assert_eq!(len % ZERO_AHEAD_BYTES, 0);
        assert!(len >= records_end + RECORD_LEN as u64 + ZERO_AHEAD_BYTES / 2, "{len}");
        drop(log);
        let (log, report) = TxLog::open(dir.path(), options).expect("reopen");
        assert_eq!((report.loaded, report.damaged), (2600, 0), "the oldest one expired, the new one kept");
        assert_eq!(log.lookup(&key(7)), Some(70));
    }

    #[tokio::test]
    async fn a_second_completion_waits_for_the_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = TxLog::open(dir.path(), TxLogOptions { sync: false, ..Default::default() }).expect("open");
        let Begin::Started(guard) = log.begin(key(1)).await else { panic!("new key") };
        let waiter = {
            let log = log.clone();
            tokio::spawn(async move { matches!(log.begin(key(1)).await, Begin::Known(3)) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        guard.record(3).expect("record");
        assert!(waiter.await.expect("joined"));
        // Several at once: one append, each remembered.
        let mut guards = Vec::new();
        for n in [3u8, 4, 5] {
            let Begin::Started(guard) = log.begin(key(n)).await else { panic!("new key") };
            guards.push((guard, u64::from(n) * 10));
        }
        log.record_all(guards).expect("recorded");
        assert_eq!((log.lookup(&key(4)), log.len()), (Some(40), 4));
        drop(log);
        let (log, report) = TxLog::open(dir.path(), TxLogOptions { sync: false, ..Default::default() }).expect("reopen");
        assert_eq!((report.loaded, log.lookup(&key(5))), (4, Some(50)));
        // A guard dropped without recording lets the next one start.
        let Begin::Started(guard) = log.begin(key(2)).await else { panic!("new key") };
        drop(guard);
        assert!(matches!(log.begin(key(2)).await, Begin::Started(_)));
    }
}
