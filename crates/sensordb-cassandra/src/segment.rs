//! One segment of the Cassandra store: what the store keeps in memory about it, how a flush
//! group becomes its rows, and how its blocks are read back and verified.
//!
//! A segment is a numbered run of groups, as in a segment file: each group is placed at the
//! segment's running end, so a block's `offset` is a *position* in a virtual byte space, unique
//! in the segment and part of the block row's key. Positions of a group that failed to commit
//! are never reused, so a row once written never changes.
//!
//! Listed blocks pin their segment's [`SegmentSource`]; the store deletes a removed segment's
//! rows only once no pin is left, so a read that listed a block can still read it.

use crate::client::{BlockKey, BlockRow, Bridge, GroupRow};
use crate::error::CassandraError;
use crate::schema::Buckets;
use crate::ttl::{encode_expiries, ttl_seconds};
use parking_lot::RwLock;
use sensordb_engine::store::{
    decode_shared_timestamps, decode_with_shared, shared_reference, verify_shared_record, Block, BlockError, BlockHeader, BlockLife,
    BlockSource, GroupBuilder, IndexEntry, RawBlock, SegmentSummary,
};
use sensordb_engine::{Error, Result, SeriesId};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Converts a position, id or series number to the bigint Cassandra stores.
pub(crate) fn bigint(value: u64) -> i64 {
    i64::try_from(value).expect("BUG: segment id or position beyond i64::MAX")
}

/// Reads the blocks of one segment; what a listed block pins.
pub(crate) struct SegmentSource {
    pub id: u64,
    pub bridge: Bridge,
    pub buckets: Buckets,
    pub keyspace: Arc<str>,
    /// For another node's segment: the writer's series id of each block, by offset, as the
    /// index lists the blocks under this node's ids (see `cluster`).
    pub origin: Option<RwLock<Vec<(u64, SeriesId)>>>,
}

impl SegmentSource {
    /// The series id the block's row and header carry: the writer's.
    fn stored_series(&self, entry: &IndexEntry) -> SeriesId {
        let Some(origin) = &self.origin else { return entry.series };
        let origin = origin.read();
        let index = origin.partition_point(|(offset, _)| *offset < entry.offset);
        origin.get(index).filter(|(offset, _)| *offset == entry.offset).map_or(entry.series, |(_, series)| *series)
    }

    pub fn key(&self, entry: &IndexEntry) -> BlockKey {
        block_key(self.id, &self.buckets, &IndexEntry { series: self.stored_series(entry), ..*entry })
    }

    /// A name for error reports, in place of a file.
    fn name(&self) -> PathBuf {
        PathBuf::from(format!("cassandra:{}/segment-{}", self.keyspace, self.id))
    }

    fn corrupt(&self, offset: u64, detail: impl Into<String>) -> Error {
        Error::corruption(self.name(), offset, detail)
    }

    /// The block's row: its bytes and the shared timestamp record it refers to, if any.
    fn fetch(&self, entry: &IndexEntry) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
        let key = self.key(entry);
        let row = self.bridge.run(|c| async move { c.select_block(key).await }).map_err(|e| e.into_engine(&self.keyspace))?;
        let (block, shared) = row.ok_or_else(|| self.corrupt(entry.offset, "the block's row is missing"))?;
        if block.len() != entry.length as usize {
            return Err(self.corrupt(entry.offset, format!("block row holds {} bytes, its index entry says {}", block.len(), entry.length)));
        }
        Ok((block, shared))
    }

    fn check_header(&self, header: &BlockHeader, entry: &IndexEntry) -> Result<()> {
        if header.series != self.stored_series(entry)
            || header.count != entry.count
            || header.min_timestamp != entry.min_timestamp
            || header.max_timestamp != entry.max_timestamp
        {
            return Err(self.corrupt(entry.offset, "block does not match its index entry"));
        }
        Ok(())
    }

    /// Reads a block without decoding it, checksums verified; the shared record comes through
    /// `records` (by position), as the blocks of one row share it.
    pub fn read_raw(&self, entry: &IndexEntry, records: &mut HashMap<u64, Arc<[u8]>>) -> Result<RawBlock> {
        let (bytes, record) = self.fetch(entry)?;
        let header = BlockHeader::verified(&bytes).map_err(|e| self.corrupt(entry.offset, e.to_string()))?;
        self.check_header(&header, entry)?;
        let shared = match shared_reference(&bytes, &header).map_err(|e| self.corrupt(entry.offset, e.to_string()))? {
            None => None,
            Some((distance, length)) => {
                let start = entry
                    .offset
                    .checked_sub(u64::from(distance))
                    .ok_or_else(|| self.corrupt(entry.offset, "shared timestamp record before the segment's start"))?;
                let record = match records.get(&start) {
                    Some(cached) if cached.len() == length as usize => cached.clone(),
                    _ => {
                        let record = record.ok_or_else(|| self.corrupt(entry.offset, "the block's shared timestamp record is missing"))?;
                        if record.len() != length as usize {
                            return Err(self.corrupt(start, "shared timestamp record has the wrong length"));
                        }
                        verify_shared_record(&record).map_err(|e| self.corrupt(start, e.to_string()))?;
                        let record: Arc<[u8]> = record.into();
                        records.insert(start, record.clone());
                        record
                    }
                };
                Some((start, record))
            }
        };
        Ok(RawBlock { entry: *entry, header, bytes, shared })
    }
}

impl BlockSource for SegmentSource {
    fn read(&self, entry: &IndexEntry) -> Result<Block> {
        let (bytes, record) = self.fetch(entry)?;
        let mut load_shared = |_distance: u32, length: u32| {
            let record = record.as_deref().ok_or_else(|| BlockError::SharedTimestamps("the block's row holds no record".into()))?;
            if record.len() != length as usize {
                return Err(BlockError::SharedTimestamps(format!("record of {} bytes, the block expects {length}", record.len())));
            }
            decode_shared_timestamps(record)
        };
        let mut block = decode_with_shared(&bytes, &mut load_shared).map_err(|e| self.corrupt(entry.offset, e.to_string()))?;
        self.check_header(&block.header, entry)?;
        // Another node's block is read under this node's id of its series.
        block.header.series = entry.series;
        Ok(block)
    }
}

/// The key of the row of `entry` in segment `segment`.
pub(crate) fn block_key(segment: u64, buckets: &Buckets, entry: &IndexEntry) -> BlockKey {
    BlockKey {
        series: i64::from(entry.series.0),
        bucket: buckets.of(entry),
        block_start: entry.min_timestamp,
        segment: bigint(segment),
        position: bigint(entry.offset),
    }
}

/// What the store knows of a live segment.
pub(crate) struct StoredSegment {
    pub summary: SegmentSummary,
    pub lives: Vec<BlockLife>,
    /// Every block, for maintenance and for deleting the rows when the segment goes; by
    /// position (groups are placed at the segment's growing end).
    pub entries: Vec<IndexEntry>,
    /// When each block's row expires (seconds since the epoch, see `ttl`), beside `entries`.
    pub expiries: Vec<Option<i64>>,
    pub source: Arc<SegmentSource>,
    /// Groups placed in it whose commit has not returned yet (groups commit concurrently).
    pub in_flight: usize,
    /// It takes no more groups, and is sealed when the last group in flight returns.
    pub seal_pending: bool,
}

impl StoredSegment {
    pub fn new(source: SegmentSource, sealed: bool) -> StoredSegment {
        let summary = SegmentSummary::of(source.id, sealed, 0, &[], 0);
        StoredSegment {
            summary,
            lives: Vec::new(),
            entries: Vec::new(),
            expiries: Vec::new(),
            source: Arc::new(source),
            in_flight: 0,
            seal_pending: false,
        }
    }

    /// Records a committed group; `expiries` are its blocks' row expiries, in order. Groups
    /// commit concurrently, so one may return before a group placed ahead of it: its blocks go
    /// in at their place by position (groups hold disjoint runs of positions).
    pub fn add(&mut self, entries: &[IndexEntry], expiries: &[Option<i64>], end_position: u64, wal_checkpoint: u64) {
        debug_assert_eq!(entries.len(), expiries.len());
        self.summary.add(entries, end_position, wal_checkpoint);
        let at = entries.first().map_or(self.entries.len(), |first| self.entries.partition_point(|e| e.offset < first.offset));
        debug_assert!(entries.last().is_none_or(|last| self.entries.get(at).is_none_or(|next| last.offset < next.offset)));
        self.lives.splice(at..at, entries.iter().map(BlockLife::of));
        self.entries.splice(at..at, entries.iter().copied());
        self.expiries.splice(at..at, expiries.iter().copied());
    }

    /// The key of every block row, with its expiry.
    pub fn keys(&self) -> Vec<(BlockKey, Option<i64>)> {
        self.entries.iter().zip(&self.expiries).map(|(e, &expiry)| (self.source.key(e), expiry)).collect()
    }

    /// The expiry of the row of the block at `offset`.
    pub fn expiry_at(&self, offset: u64) -> Option<i64> {
        let index = self.entries.partition_point(|e| e.offset < offset);
        self.entries.get(index).filter(|e| e.offset == offset).and_then(|_| self.expiries.get(index).copied().flatten())
    }
}

/// A group placed in a segment: its rows, its commit record and its entries.
pub(crate) struct PlacedGroup {
    pub rows: Vec<BlockRow>,
    pub group: GroupRow,
    pub entries: Vec<IndexEntry>,
    pub expiries: Vec<Option<i64>>,
    pub end_position: u64,
}

/// How long the rows of a group live: each block's row expiry (see `ttl`), and the clock the
/// TTLs count from.
pub(crate) struct Lifetimes<'a> {
    pub expiry: &'a dyn Fn(&IndexEntry) -> Option<i64>,
    pub now: i64,
}

/// Places `group` at `base` in segment `segment`: every block gets `sequence`, a row of its
/// own (with the TTL of its expiry) and a copy of the shared timestamp record it refers to.
pub(crate) fn place_group(
    group: GroupBuilder,
    segment: u64,
    base: u64,
    sequence: u64,
    wal_checkpoint: u64,
    buckets: &Buckets,
    lifetimes: &Lifetimes<'_>,
) -> Result<PlacedGroup, CassandraError> {
    let (bytes, mut entries) = group.into_blocks();
    let mut records: HashMap<usize, Arc<[u8]>> = HashMap::new();
    let mut rows = Vec::with_capacity(entries.len());
    let mut expiries = Vec::with_capacity(entries.len());
    let bad = |detail: String| CassandraError::MalformedGroup(detail);
    for entry in &mut entries {
        let start = usize::try_from(entry.offset).map_err(|e| bad(e.to_string()))?;
        let block = bytes.get(start..start + entry.length as usize).ok_or_else(|| bad("block outside its group".into()))?;
        let header = BlockHeader::verified(block).map_err(|e| bad(e.to_string()))?;
        let shared_timestamps = match shared_reference(block, &header).map_err(|e| bad(e.to_string()))? {
            None => None,
            Some((distance, length)) => {
                let record_start = start.checked_sub(distance as usize).ok_or_else(|| bad("record before the group".into()))?;
                let record = match records.get(&record_start) {
                    Some(record) => record.clone(),
                    None => {
                        let record: Arc<[u8]> = bytes
                            .get(record_start..record_start + length as usize)
                            .ok_or_else(|| bad("record outside the group".into()))?
                            .into();
                        records.insert(record_start, record.clone());
                        record
                    }
                };
                Some(record)
            }
        };
        entry.offset += base;
        entry.sequence = sequence;
        // A lifetime Cassandra would refuse is no lifetime: the row is kept until deleted.
        let (expiry, ttl) = match (lifetimes.expiry)(entry).and_then(|e| Some((e, ttl_seconds(e, lifetimes.now)?))) {
            Some((expiry, ttl)) => (Some(expiry), ttl),
            None => (None, 0),
        };
        expiries.push(expiry);
        rows.push(BlockRow {
            key: block_key(segment, buckets, entry),
            block: bytes.slice(start..start + entry.length as usize),
            shared_timestamps,
            ttl,
        });
    }
    let end_position = base + bytes.len() as u64;
    let mut encoded = Vec::new();
    IndexEntry::encode_list(&entries, &mut encoded);
    let group = GroupRow {
        segment: bigint(segment),
        position: bigint(base),
        end_position: bigint(end_position),
        wal_checkpoint: bigint(wal_checkpoint),
        entries: encoded,
        expiries: encode_expiries(&expiries),
    };
    Ok(PlacedGroup { rows, group, entries, expiries, end_position })
}
