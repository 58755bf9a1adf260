//! The rewrite protocol of the segment store: a compaction or reclaim merge output is written
//! under a temporary name ([`SegmentRewriter`]), sealed with the ids of the segments it
//! replaces, renamed into place and installed in the index in one step, then the inputs are
//! removed; an output given up on is removed at once and its id given back. Start-up finishes
//! an interrupted install (the output's footer names its inputs) or removes the temporary file.
//!
//! An output is cut where a segment taking flushes would be sealed (`segment_bytes_max`,
//! `segment_blocks_max`), so a rewrite of many series gives several segments, each a stretch
//! of series ids that later rewrites of the same series find alone. Several outputs are sealed
//! under their temporary names first, then a [`RewriteManifest`] naming them is made durable,
//! and only then are they renamed: start-up finishes the renames of a manifest it finds, so
//! the outputs go in place all together or (no manifest) not at all.

use super::manifest::RewriteManifest;
use super::{SegmentFile, SegmentHandle, SegmentStore};
use crate::error::{Error, Result};
use crate::filenames::{
    is_temporary_rewrite_manifest, numbered_file, parse_numbered_file, rewrite_manifest, temporary_segment, REWRITE_MANIFEST_EXTENSION,
    SEGMENT_EXTENSION,
};
use crate::fs::{FileSystem, StorageFile};
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

    /// A new rewrite output under a temporary name.
    pub(super) fn create_rewrite_output(&self) -> Result<SegmentWriter> {
        let id = self.allocate_segment_id();
        SegmentWriter::create_temporary(self.fs.as_ref(), &self.dir, id, self.options.sync).inspect_err(|_| {
            // Nothing was left behind (`create_temporary` removes what it made): a retry takes
            // the same id instead of burning one per failed attempt.
            self.release_segment_id(id);
        })
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

    /// Puts sealed rewrite outputs in place of the segments they replace: one index update
    /// (readers see either the old blocks or the new ones), then the old files are removed.
    /// Reads that listed blocks of a replaced segment keep its handle until they finish.
    fn install_compacted(&self, outputs: Vec<CompactedSegment>, replaced: &[u64]) -> Result<Vec<SegmentSummary>> {
        let mut placed = Vec::with_capacity(outputs.len());
        for output in outputs {
            let bytes = output.file.len().map_err(|e| Error::io(&output.path, e))?;
            let summary = match &output.directory {
                Some(directory) => SegmentSummary::of_directory(output.id, bytes, directory, output.wal_checkpoint),
                None => SegmentSummary::of(output.id, true, bytes, &output.entries, output.wal_checkpoint),
            };
            placed.push((output, bytes, summary));
        }
        let summaries = placed.iter().map(|(_, _, summary)| *summary).collect();
        let removed: Vec<SegmentFile> = {
            let mut index = self.index.write();
            let mut files = self.files.write();
            let removed: Vec<SegmentFile> = replaced.iter().filter_map(|id| files.remove(id)).collect();
            for old in &removed {
                old.blocks.remove_from(&mut index, old.handle.id);
            }
            for (output, bytes, summary) in placed {
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
            }
            removed
        };
        self.remove_files(removed)?;
        Ok(summaries)
    }

    /// Renames the sealed `outputs` of one rewrite into place: one rename, or a manifest first
    /// when there are several (see the module comment). Fails, with every temporary file
    /// removed, only while nothing is in place yet; once the manifest is durable, an output
    /// that cannot be renamed is installed under its temporary name (start-up renames it), and
    /// once something is renamed, the install goes on whatever fails.
    fn place_outputs(&self, outputs: &mut [CompactedSegment], replaced: &[u64]) -> Result<()> {
        let manifest = RewriteManifest { outputs: outputs.iter().map(|o| o.id).collect(), replaced: replaced.to_vec() };
        let first = manifest.outputs[0];
        if outputs.len() > 1 {
            if let Err(e) = manifest.write(self.fs.as_ref(), &self.dir, self.options.sync) {
                self.discard_outputs(outputs);
                return Err(e);
            }
        }
        let (single, mut all_renamed) = (outputs.len() == 1, true);
        for output in outputs.iter_mut() {
            let final_path = numbered_file(&self.dir, output.id, SEGMENT_EXTENSION);
            match self.fs.rename(&output.path, &final_path) {
                Ok(()) => output.path = final_path,
                Err(e) if single => {
                    let error = Error::io(&output.path, e);
                    self.discard_outputs(std::slice::from_mut(output));
                    return Err(error);
                }
                Err(e) => {
                    all_renamed = false;
                    tracing::error!(error = %e, file = %output.path.display(), "rewrite output installed under its temporary name; renamed at the next start");
                }
            }
        }
        if self.options.sync {
            if let Err(e) = self.fs.sync_dir(&self.dir) {
                // The renames are made, durable or not: the index must follow the files, or a
                // later rewrite of the inputs would leave their points in two places should
                // the renames survive. Either way start-up finds a consistent state.
                tracing::error!(error = %e, dir = %self.dir.display(), "could not sync the directory after renaming rewrite outputs");
            }
        }
        if outputs.len() > 1 && all_renamed {
            // Kept, it is found complete at the next start and removed then.
            let path = rewrite_manifest(&self.dir, first);
            if let Err(e) = self.fs.remove(&path) {
                tracing::warn!(error = %e, file = %path.display(), "could not remove a finished rewrite manifest; removed at the next start");
            }
        }
        Ok(())
    }

    /// Removes the temporary files of sealed outputs never put in place, newest first (so
    /// their ids can be given back).
    fn discard_outputs(&self, outputs: &[CompactedSegment]) {
        for output in outputs.iter().rev() {
            self.discard_rewrite(output.id, &output.path);
        }
    }
}

/// Finishes, at start-up, the rewrites with several outputs whose manifests are in `dir`:
/// outputs still under temporary names are renamed into place when every output is there (the
/// manifest was made durable only after they were all sealed); should one be missing while
/// every input is still in place, the outputs are removed instead. Then the manifest goes.
/// Runs before the segments are scanned, which removes the inputs that outputs name and any
/// temporary file left.
pub(super) fn finish_interrupted_rewrites(
    fs: &dyn FileSystem,
    dir: &Path,
    sync: bool,
    problems: &mut Vec<(PathBuf, u64, String)>,
) -> Result<()> {
    let mut changed = false;
    for path in fs.list(dir).map_err(|e| Error::io(dir, e))? {
        if is_temporary_rewrite_manifest(&path) {
            // Never renamed into place: no output was renamed either.
            fs.remove(&path).map_err(|e| Error::io(&path, e))?;
            changed = true;
            continue;
        }
        if parse_numbered_file(&path, REWRITE_MANIFEST_EXTENSION).is_none() {
            continue;
        }
        let manifest = match RewriteManifest::read(fs, &path) {
            Ok(manifest) => manifest,
            Err(Error::Corruption { path, offset, detail }) => {
                // Left where it is, reported at every start: what it would finish is unknown.
                tracing::error!(file = %path.display(), offset, problem = %detail, "rewrite manifest unreadable");
                problems.push((path, offset, detail));
                continue;
            }
            Err(e) => return Err(e),
        };
        let in_place = |id: u64| fs.exists(&numbered_file(dir, id, SEGMENT_EXTENSION));
        let temporary = |id: u64| fs.exists(&temporary_segment(dir, id));
        if manifest.outputs.iter().all(|&id| in_place(id) || temporary(id)) {
            for &id in manifest.outputs.iter().filter(|&&id| !in_place(id)) {
                let from = temporary_segment(dir, id);
                fs.rename(&from, &numbered_file(dir, id, SEGMENT_EXTENSION)).map_err(|e| Error::io(&from, e))?;
                problems.push((from, 0, "renamed an output of an interrupted rewrite into place".into()));
            }
        } else if manifest.replaced.iter().all(|&id| in_place(id)) {
            for &id in &manifest.outputs {
                for output in [numbered_file(dir, id, SEGMENT_EXTENSION), temporary_segment(dir, id)] {
                    if fs.exists(&output) {
                        fs.remove(&output).map_err(|e| Error::io(&output, e))?;
                        problems.push((output, 0, "removed an output of a rewrite missing another output".into()));
                    }
                }
            }
        }
        // Otherwise the rewrite was finished and later ones moved on: nothing to do.
        fs.remove(&path).map_err(|e| Error::io(&path, e))?;
        changed = true;
    }
    if changed && sync {
        fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
    }
    Ok(())
}

/// A compaction or merge output: written under temporary names, one segment after another,
/// and put in place with the list of segments it replaces in each footer (so start-up finishes
/// an interrupted install). Dropped before it is installed (an append failed on a full disk,
/// say), it removes its temporary files.
pub(super) struct SegmentRewriter<'a> {
    store: &'a SegmentStore,
    /// The output being written; `None` between outputs and once installed.
    writer: Option<SegmentWriter>,
    /// Outputs sealed under their temporary names, waiting for the install.
    sealed: Vec<CompactedSegment>,
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
        SegmentRewriter { store, writer: Some(writer), sealed: Vec::new(), replaced, sequence, wal_checkpoint }
    }

    /// Seals the output being written under its temporary name.
    fn seal_output(&mut self) -> Result<()> {
        let writer = self.writer.take().expect("BUG: no output to seal");
        let (id, path, file) = (writer.id(), writer.path().to_path_buf(), writer.file());
        // A version-2 output is indexed by its directory: its entries (a million blocks is
        // 50 MB) are not copied for the index.
        let entries = if writer.version() >= 2 { Vec::new() } else { writer.entries().to_vec() };
        match writer.seal_temporary(&self.replaced) {
            Ok(directory) => {
                self.sealed.push(CompactedSegment { id, path, file, entries, directory, wal_checkpoint: self.wal_checkpoint });
                Ok(())
            }
            Err(e) => {
                self.store.discard_rewrite(id, &path);
                Err(e)
            }
        }
    }
}

impl SegmentRewrite for SegmentRewriter<'_> {
    fn append(&mut self, parts: Vec<GroupBuilder>) -> Result<u64> {
        if self.writer.is_none() {
            self.writer = Some(self.store.create_rewrite_output()?);
        }
        let writer = self.writer.as_mut().expect("BUG: no output to append to");
        let written_before = writer.bytes();
        let parts = parts.into_iter().map(GroupBuilder::into_part).collect();
        writer.append_parts(parts, self.sequence, self.wal_checkpoint)?;
        let written = writer.bytes() - written_before;
        let options = &self.store.options;
        if writer.bytes() >= options.segment_bytes_max || writer.entries().len() >= options.segment_blocks_max {
            self.seal_output()?;
        }
        Ok(written)
    }

    fn install(mut self: Box<Self>) -> Result<Vec<SegmentSummary>> {
        if self.writer.as_ref().is_some_and(|w| !w.entries().is_empty() || self.sealed.is_empty()) {
            self.seal_output()?;
        }
        let mut outputs = std::mem::take(&mut self.sealed);
        if let Some(empty) = self.writer.take() {
            let (id, path) = (empty.id(), empty.path().to_path_buf());
            drop(empty);
            self.store.discard_rewrite(id, &path);
        }
        let store = self.store;
        store.place_outputs(&mut outputs, &self.replaced)?;
        store.install_compacted(outputs, &self.replaced)
    }
}

impl Drop for SegmentRewriter<'_> {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            let (id, temporary) = (writer.id(), writer.path().to_path_buf());
            drop(writer);
            self.store.discard_rewrite(id, &temporary);
        }
        let sealed = std::mem::take(&mut self.sealed);
        self.store.discard_outputs(&sealed);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SegmentStore, SegmentStoreOptions};
    use crate::fs::{CrashFs, CrashMode, FileSystem};
    use crate::model::SeriesId;
    use crate::store::test_groups::group;
    use crate::store::BlockStore;
    use std::path::PathBuf;
    use std::sync::Arc;

    const SERIES: u32 = 12;

    fn options() -> SegmentStoreOptions {
        SegmentStoreOptions { segment_blocks_max: 4, sync: true, ..SegmentStoreOptions::default() }
    }

    /// Every series' timestamps as the store reads them, blocks in listing order.
    fn timestamps(store: &SegmentStore, series: u32) -> Vec<i64> {
        let mut all: Vec<i64> = store
            .blocks(SeriesId(series), i64::MIN, i64::MAX)
            .iter()
            .flat_map(|listed| store.read_block(listed).expect("an indexed block reads").timestamps)
            .collect();
        all.sort_unstable();
        all
    }

    /// Rewrites every segment of the store: each series' two blocks of 5 points as one of 10,
    /// 4 blocks a segment, so the output is three segments.
    fn rewrite_all(store: &SegmentStore) -> crate::error::Result<Vec<crate::store::SegmentSummary>> {
        let ids = store.segment_ids();
        let mut output = store.begin_rewrite(&ids, 100, 0)?;
        for series in 1..=SERIES {
            output.append(vec![group(series, 0, 10)])?;
        }
        output.install()
    }

    /// The power lost at every step of a rewrite with several outputs (sealing them, the
    /// manifest, each rename, removing the inputs and the manifest), under every way the disk
    /// may keep unsynced changes: the reopened store holds each point exactly once (the
    /// inputs, or all the outputs), and no temporary file or manifest is left.
    #[test]
    fn a_power_loss_at_any_step_of_a_rewrite_with_several_outputs_keeps_every_point_once() {
        let root = PathBuf::from("/crash-root");
        let dir = root.join("segments");
        let base = CrashFs::new(&root);
        {
            let (store, _) = SegmentStore::open(Arc::new(base.clone()), &dir, options()).expect("open");
            for half in 0..2 {
                for series in 1..=SERIES {
                    store.put_group(group(series, half * 5, 5), 0).expect("put");
                }
            }
            store.seal().expect("seal");
            assert_eq!(store.segment_ids().len(), 6);
        }
        let whole = base.crash_image(CrashMode::DropUnsynced, 0);
        let (store, _) = SegmentStore::open(Arc::new(whole.clone()), &dir, options()).expect("open");
        let opened = whole.operations();
        let outputs = rewrite_all(&store).expect("rewrite");
        assert_eq!(outputs.len(), 3, "cut at 4 blocks a segment: {outputs:?}");
        assert_eq!(store.segment_ids().len(), 3);
        drop(store);
        let operations = whole.operations();
        let (mut inputs_kept, mut outputs_kept) = (0, 0);
        for point in opened..=operations {
            let fs = base.crash_image(CrashMode::DropUnsynced, 0);
            let (store, _) = SegmentStore::open(Arc::new(fs.clone()), &dir, options()).expect("open");
            fs.crash_at(Some(point));
            let _ = rewrite_all(&store);
            drop(store);
            for mode in CrashMode::ALL {
                let image = fs.crash_image(mode, point);
                let (store, recovery) = SegmentStore::open(Arc::new(image.clone()), &dir, options())
                    .unwrap_or_else(|e| panic!("recovery after a crash at {point} ({mode:?}): {e}"));
                for series in 1..=SERIES {
                    assert_eq!(timestamps(&store, series), (0..10).collect::<Vec<_>>(), "series {series}, crash at {point} ({mode:?})");
                }
                let left: Vec<PathBuf> =
                    image.list(&dir).expect("list").into_iter().filter(|p| p.extension().is_none_or(|e| e != "seg")).collect();
                assert!(left.is_empty(), "crash at {point} ({mode:?}): {left:?} left; {:?}", recovery.problems);
                match store.segment_ids().len() {
                    6 => inputs_kept += 1,
                    3 => outputs_kept += 1,
                    other => panic!("crash at {point} ({mode:?}): {other} segments"),
                }
            }
        }
        assert!(inputs_kept > 0 && outputs_kept > 0, "inputs kept {inputs_kept}, outputs kept {outputs_kept}");
    }
}
