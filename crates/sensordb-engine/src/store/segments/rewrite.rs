//! The rewrite protocol of the segment store: a compaction or reclaim merge output is written
//! under a temporary name ([`SegmentRewriter`]), sealed with the ids of the segments it
//! replaces, renamed into place and installed in the index in one step, then the inputs are
//! removed; an output given up on is removed at once and its id given back. Start-up finishes
//! an interrupted install (the output's footer names its inputs) or removes the temporary file.

use super::{SegmentFile, SegmentHandle, SegmentStore};
use crate::error::{Error, Result};
use crate::filenames::SEGMENT_EXTENSION;
use crate::fs::StorageFile;
use crate::segment::SegmentWriter;
use crate::store::{GroupBuilder, SegmentRewrite, SegmentSummary};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A sealed rewrite output, ready for [`SegmentStore::install_compacted`].
struct CompactedSegment {
    id: u64,
    path: PathBuf,
    file: Arc<dyn StorageFile>,
    entries: Vec<crate::segment::IndexEntry>,
    /// The series directory written (format version 2).
    directory: Option<crate::segment::DirectoryIndex>,
    wal_checkpoint: u64,
}

impl SegmentStore {
    /// A fresh segment id for a compaction output.
    pub(super) fn allocate_segment_id(&self) -> u64 {
        let mut open = self.open.lock();
        let id = open.next_id;
        open.next_id += 1;
        id
    }

    /// Gives back `id`, allocated for an output that was never installed and whose file is
    /// gone, if no id was allocated after it.
    pub(super) fn release_segment_id(&self, id: u64) {
        let mut open = self.open.lock();
        if open.next_id == id + 1 {
            open.next_id = id;
        }
    }

    /// Removes the temporary file of a rewrite that was not installed (failed, or given up
    /// on), so no `.seg.tmp` stays behind until the next start, and gives its id back.
    fn discard_rewrite(&self, id: u64, temporary: &Path) {
        match self.fs.remove(temporary) {
            Ok(()) => self.release_segment_id(id),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !self.fs.exists(&crate::filenames::numbered_file(&self.dir, id, SEGMENT_EXTENSION)) {
                    self.release_segment_id(id);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, file = %temporary.display(), "could not remove an unfinished compaction output; removed at the next start")
            }
        }
    }

    /// Puts a sealed compaction output in place of the segments it replaces: one index update
    /// (readers see either the old blocks or the new ones), then the old files are removed.
    /// Reads that listed blocks of a replaced segment keep its handle until they finish.
    fn install_compacted(&self, output: CompactedSegment, replaced: &[u64]) -> Result<SegmentSummary> {
        let bytes = output.file.len().map_err(|e| Error::io(&output.path, e))?;
        let summary = match &output.directory {
            Some(directory) => SegmentSummary::of_directory(output.id, bytes, directory, output.wal_checkpoint),
            None => SegmentSummary::of(output.id, true, bytes, &output.entries, output.wal_checkpoint),
        };
        let removed: Vec<SegmentFile> = {
            let mut index = self.index.write();
            let mut files = self.files.write();
            let removed: Vec<SegmentFile> = replaced.iter().filter_map(|id| files.remove(id)).collect();
            for old in &removed {
                old.blocks.remove_from(&mut index, old.handle.id);
            }
            let handle = SegmentHandle { id: output.id, path: output.path, file: output.file };
            match output.directory {
                Some(directory) => {
                    let file = SegmentFile::with_runs(handle, bytes, summary, &directory);
                    index.sealed.insert(file.extents(directory));
                    files.insert(output.id, file);
                }
                None => {
                    index.resident.insert(output.id, &output.entries);
                    files.insert(output.id, SegmentFile::new(handle, bytes, summary, &output.entries));
                }
            }
            removed
        };
        self.remove_files(removed)?;
        Ok(summary)
    }
}

/// A compaction or merge output: written under a temporary name, renamed into place with the
/// list of segments it replaces in its footer (so start-up finishes an interrupted install).
/// Dropped before it is installed (an append failed on a full disk, say), it removes its
/// temporary file.
pub(super) struct SegmentRewriter<'a> {
    store: &'a SegmentStore,
    /// `None` once installed (or being installed).
    writer: Option<SegmentWriter>,
    replaced: Vec<u64>,
    sequence: u64,
    wal_checkpoint: u64,
}

impl<'a> SegmentRewriter<'a> {
    /// `replaced` in any order: a run is in sequence order, and an earlier output (a new id
    /// over old sequences) can come before a segment of a smaller id. The footer lists them
    /// ascending.
    pub(super) fn new(store: &'a SegmentStore, writer: SegmentWriter, mut replaced: Vec<u64>, sequence: u64, wal_checkpoint: u64) -> Self {
        replaced.sort_unstable();
        SegmentRewriter { store, writer: Some(writer), replaced, sequence, wal_checkpoint }
    }
}

impl SegmentRewrite for SegmentRewriter<'_> {
    fn append(&mut self, parts: Vec<GroupBuilder>) -> Result<u64> {
        let writer = self.writer.as_mut().expect("BUG: append to an installed rewrite");
        let written_before = writer.bytes();
        let parts = parts.into_iter().map(GroupBuilder::into_part).collect();
        writer.append_parts(parts, self.sequence, self.wal_checkpoint)?;
        Ok(writer.bytes() - written_before)
    }

    fn install(mut self: Box<Self>) -> Result<SegmentSummary> {
        let writer = self.writer.take().expect("BUG: a rewrite installed twice");
        let store = self.store;
        let id = writer.id();
        let temporary = writer.path().to_path_buf();
        // A version-2 output is indexed by its directory: its entries (a million blocks is
        // 50 MB) are not copied for the index.
        let entries = if writer.version() >= 2 { Vec::new() } else { writer.entries().to_vec() };
        let file = writer.file();
        let (path, directory) = match writer.seal_replacing(store.fs.as_ref(), &store.dir, &self.replaced) {
            Ok(sealed) => sealed,
            Err(e) => {
                // Not renamed into place: the temporary goes. (Renamed, the output is complete
                // and names what it replaces; start-up finishes the install.)
                if store.fs.exists(&temporary) {
                    store.discard_rewrite(id, &temporary);
                }
                return Err(e);
            }
        };
        store
            .install_compacted(CompactedSegment { id, path, file, entries, directory, wal_checkpoint: self.wal_checkpoint }, &self.replaced)
    }
}

impl Drop for SegmentRewriter<'_> {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            let (id, temporary) = (writer.id(), writer.path().to_path_buf());
            drop(writer);
            self.store.discard_rewrite(id, &temporary);
        }
    }
}
