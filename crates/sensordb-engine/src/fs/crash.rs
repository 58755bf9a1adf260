//! A file system in memory that knows which of its writes a power loss would keep, for crash
//! tests below the engine ([`CrashFs`]).
//!
//! A `kill -9` keeps the kernel's page cache, so it cannot test what `fsync` promises. This file
//! system keeps, besides what a reader sees now, what is *durable*: a file's contents as of its
//! last `sync_data`, a directory's entries as of its last `sync_dir`, and the list of changes
//! made since, in order. [`CrashFs::crash_image`] builds the file system a power loss at this
//! moment could leave ([`CrashMode`]: every unsynced change dropped, the last write torn as
//! LazyFS does, the changes kept in issue order up to a torn one, or an arbitrary subset of
//! pages written back with directory changes kept in journal order).
//!
//! The crash itself is [`CrashFs::crash_at`]: from the n-th mutating operation on (writes,
//! length changes, syncs, creations, renames, removals), every operation fails with EIO, as if
//! the machine had stopped there; what the engine did up to then is what the image is built
//! from. Reads, listings and lengths are not counted: they change nothing a crash could keep.
//!
//! The model is strict POSIX: a new file's directory entry survives only a `sync_dir` of its
//! directory, a rename or removal likewise; a directory survives only a `sync_dir` of its
//! parent (the root given at creation and its ancestors always exist). File data survives only
//! `sync_data` of that file (which, like Linux's fdatasync, covers its length too).

use super::{DiskSpace, FileSystem, StorageFile};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a power loss keeps of the changes not yet synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Nothing: every file as of its last `sync_data`, every directory as of its last `sync_dir`.
    DropUnsynced,
    /// As `DropUnsynced`, except that the most recent unsynced write keeps a prefix of its bytes
    /// (LazyFS's torn write).
    TearLastWrite,
    /// The unsynced changes (data and directory entries alike) reached the disk in the order
    /// they were made, up to one of them, which keeps a prefix of its bytes if it is a write.
    InOrderPrefix,
    /// Page cache write-back in any order: each 4 KiB piece of each unsynced write (and each
    /// length change) is kept or not at random; directory changes are kept in the order they
    /// were made up to a random one, as a journal commits them.
    RandomWriteback,
}

impl CrashMode {
    pub const ALL: [CrashMode; 4] =
        [CrashMode::DropUnsynced, CrashMode::TearLastWrite, CrashMode::InOrderPrefix, CrashMode::RandomWriteback];
}

/// The page size pieces of writes are written back in under [`CrashMode::RandomWriteback`].
const PAGE_BYTES: u64 = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    File(u64),
    Dir,
}

#[derive(Clone, Debug, Default)]
struct Inode {
    /// What readers see.
    data: Vec<u8>,
    /// What survives a power loss that keeps no unsynced change.
    durable: Vec<u8>,
}

#[derive(Clone, Debug)]
enum DataChange {
    Write { offset: u64, bytes: Vec<u8> },
    SetLen(u64),
}

#[derive(Clone, Debug)]
enum NameChange {
    Create { path: PathBuf, inode: u64 },
    Mkdir(PathBuf),
    Remove(PathBuf),
    Rename { from: PathBuf, to: PathBuf },
}

impl NameChange {
    /// The directories whose `sync_dir` makes this change durable.
    fn touches(&self, dir: &Path) -> bool {
        let parent_is = |path: &PathBuf| path.parent() == Some(dir);
        match self {
            NameChange::Create { path, .. } | NameChange::Mkdir(path) | NameChange::Remove(path) => parent_is(path),
            NameChange::Rename { from, to } => parent_is(from) || parent_is(to),
        }
    }
}

#[derive(Clone, Debug)]
enum Change {
    Data { inode: u64, change: DataChange },
    Name(NameChange),
}

#[derive(Default)]
struct State {
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    /// The namespace readers see.
    names: BTreeMap<PathBuf, Node>,
    /// The namespace as of the last `sync_dir` of each directory.
    durable_names: BTreeMap<PathBuf, Node>,
    /// Changes not yet durable, oldest first.
    unsynced: Vec<Change>,
    /// Mutating operations issued so far (counting the failed ones after a crash).
    operations: u64,
    /// The operation from which on everything fails.
    crash_at: Option<u64>,
    crashed: bool,
}

fn dead() -> io::Error {
    io::Error::other("simulated power loss: the machine is off")
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{}: no such file or directory", path.display()))
}

impl State {
    /// Counts one mutating operation; fails once the crash point is reached.
    fn operate(&mut self) -> io::Result<()> {
        let this = self.operations;
        self.operations += 1;
        if self.crashed || self.crash_at.is_some_and(|at| this >= at) {
            self.crashed = true;
            return Err(dead());
        }
        Ok(())
    }

    /// Fails reads after the crash too: a dead machine answers nothing.
    fn alive(&self) -> io::Result<()> {
        if self.crashed {
            return Err(dead());
        }
        Ok(())
    }

    fn parent_is_dir(&self, path: &Path) -> bool {
        path.parent().is_some_and(|parent| self.names.get(parent) == Some(&Node::Dir))
    }

    fn inode(&mut self, inode: u64) -> &mut Inode {
        self.inodes.entry(inode).or_default()
    }

    fn new_file(&mut self, path: &Path) -> io::Result<u64> {
        self.operate()?;
        if self.names.contains_key(path) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{} exists", path.display())));
        }
        if !self.parent_is_dir(path) {
            return Err(not_found(path));
        }
        let inode = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(inode, Inode::default());
        self.names.insert(path.to_path_buf(), Node::File(inode));
        self.unsynced.push(Change::Name(NameChange::Create { path: path.to_path_buf(), inode }));
        Ok(inode)
    }

    fn file_at(&self, path: &Path) -> io::Result<u64> {
        self.alive()?;
        match self.names.get(path) {
            Some(Node::File(inode)) => Ok(*inode),
            Some(Node::Dir) => Err(io::Error::other(format!("{} is a directory", path.display()))),
            None => Err(not_found(path)),
        }
    }

    fn sync_file(&mut self, inode: u64) -> io::Result<()> {
        self.operate()?;
        let file = self.inode(inode);
        file.durable = file.data.clone();
        self.unsynced.retain(|change| !matches!(change, Change::Data { inode: changed, .. } if *changed == inode));
        Ok(())
    }

    fn sync_directory(&mut self, dir: &Path) -> io::Result<()> {
        self.operate()?;
        if self.names.get(dir) != Some(&Node::Dir) {
            return Err(not_found(dir));
        }
        // Every directory a pending change in `dir` touches (a rename's other end too) is made
        // durable whole, as one journal transaction would.
        let mut dirs: Vec<PathBuf> = vec![dir.to_path_buf()];
        for change in &self.unsynced {
            if let Change::Name(name @ NameChange::Rename { from, to }) = change {
                if name.touches(dir) {
                    dirs.extend([from, to].iter().filter_map(|p| p.parent().map(Path::to_path_buf)));
                }
            }
        }
        for dir in &dirs {
            let children = |names: &BTreeMap<PathBuf, Node>| -> Vec<PathBuf> {
                names.keys().filter(|path| path.parent() == Some(dir.as_path())).cloned().collect()
            };
            for path in children(&self.durable_names) {
                self.durable_names.remove(&path);
            }
            for path in children(&self.names) {
                self.durable_names.insert(path.clone(), self.names[&path]);
            }
        }
        self.unsynced.retain(|change| !matches!(change, Change::Name(name) if dirs.iter().any(|dir| name.touches(dir))));
        Ok(())
    }
}

/// A small deterministic generator (SplitMix64), so images depend on the seed alone.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    fn up_to(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            return self.next();
        }
        self.next() % (max + 1)
    }
}

fn apply_data(data: &mut Vec<u8>, change: &DataChange) {
    match change {
        // A write of nothing (a tear before its first byte) does not extend the file.
        DataChange::Write { bytes, .. } if bytes.is_empty() => {}
        DataChange::Write { offset, bytes } => {
            let start = *offset as usize;
            let end = start + bytes.len();
            if data.len() < end {
                data.resize(end, 0);
            }
            data[start..end].copy_from_slice(bytes);
        }
        DataChange::SetLen(len) => data.resize(*len as usize, 0),
    }
}

fn apply_name(names: &mut BTreeMap<PathBuf, Node>, change: &NameChange) {
    match change {
        NameChange::Create { path, inode } => {
            names.insert(path.clone(), Node::File(*inode));
        }
        NameChange::Mkdir(path) => {
            names.insert(path.clone(), Node::Dir);
        }
        NameChange::Remove(path) => {
            names.remove(path);
        }
        NameChange::Rename { from, to } => {
            if let Some(node) = names.remove(from) {
                names.insert(to.clone(), node);
            }
        }
    }
}

/// A file system in memory that can show what a power loss would leave; see the module docs.
#[derive(Clone)]
pub struct CrashFs {
    state: Arc<Mutex<State>>,
}

impl CrashFs {
    /// An empty file system in which `root` and its ancestors exist (durably) as directories.
    pub fn new(root: &Path) -> CrashFs {
        let mut state = State::default();
        for dir in root.ancestors() {
            state.names.insert(dir.to_path_buf(), Node::Dir);
        }
        state.durable_names = state.names.clone();
        CrashFs { state: Arc::new(Mutex::new(state)) }
    }

    /// From the `operation`-th mutating operation on (0-based; `None`: never), every operation
    /// fails as if the power had gone out just before it.
    pub fn crash_at(&self, operation: Option<u64>) {
        self.state.lock().crash_at = operation;
    }

    /// Mutating operations issued so far.
    pub fn operations(&self) -> u64 {
        self.state.lock().operations
    }

    /// True once the crash point was reached.
    pub fn crashed(&self) -> bool {
        self.state.lock().crashed
    }

    /// Unsynced changes pending (data writes, length changes, directory changes).
    pub fn unsynced_changes(&self) -> usize {
        self.state.lock().unsynced.len()
    }

    /// The file system a power loss now would leave under `mode`, with random choices drawn
    /// from `seed`: every change durable, no crash point set.
    pub fn crash_image(&self, mode: CrashMode, seed: u64) -> CrashFs {
        let state = self.state.lock();
        let mut random = SplitMix(seed);
        let changes = &state.unsynced;
        // Which changes survive, and the one kept only in part (index, bytes kept).
        let mut kept = vec![false; changes.len()];
        let mut torn: Option<(usize, usize)> = None;
        // Pieces of writes kept under `RandomWriteback`: (index, start, end) within the bytes.
        let mut pieces: Vec<(usize, usize, usize)> = Vec::new();
        match mode {
            CrashMode::DropUnsynced => {}
            CrashMode::TearLastWrite => {
                if let Some(last) = changes.iter().rposition(|c| matches!(c, Change::Data { change: DataChange::Write { .. }, .. })) {
                    if let Change::Data { change: DataChange::Write { bytes, .. }, .. } = &changes[last] {
                        torn = Some((last, random.up_to(bytes.len() as u64) as usize));
                    }
                }
            }
            CrashMode::InOrderPrefix => {
                let cut = random.up_to(changes.len() as u64) as usize;
                kept[..cut].iter_mut().for_each(|k| *k = true);
                if let Some(Change::Data { change: DataChange::Write { bytes, .. }, .. }) = changes.get(cut) {
                    torn = Some((cut, random.up_to(bytes.len() as u64) as usize));
                }
            }
            CrashMode::RandomWriteback => {
                let names = changes.iter().filter(|c| matches!(c, Change::Name(_))).count();
                let names_kept = random.up_to(names as u64) as usize;
                let mut name_index = 0;
                for (index, change) in changes.iter().enumerate() {
                    match change {
                        Change::Name(_) => {
                            kept[index] = name_index < names_kept;
                            name_index += 1;
                        }
                        Change::Data { change: DataChange::SetLen(_), .. } => kept[index] = random.next() & 1 == 1,
                        Change::Data { change: DataChange::Write { offset, bytes }, .. } => {
                            // Split at page boundaries of the file.
                            let mut start = 0usize;
                            while start < bytes.len() {
                                let at = offset + start as u64;
                                let end = (start + (PAGE_BYTES - at % PAGE_BYTES) as usize).min(bytes.len());
                                if random.next() & 1 == 1 {
                                    pieces.push((index, start, end));
                                }
                                start = end;
                            }
                        }
                    }
                }
            }
        }
        // The namespace: durable entries, then the kept directory changes in order.
        let mut names = state.durable_names.clone();
        for (index, change) in changes.iter().enumerate() {
            if let Change::Name(name) = change {
                if kept[index] {
                    apply_name(&mut names, name);
                }
            }
        }
        // Only what is reachable from the root survives: a directory entry in a lost directory
        // is lost with it.
        let reachable: Vec<PathBuf> = names
            .keys()
            .filter(|path| path.ancestors().skip(1).all(|dir| names.get(dir) == Some(&Node::Dir) || dir.as_os_str().is_empty()))
            .cloned()
            .collect();
        names.retain(|path, _| reachable.contains(path));
        // File contents: durable bytes, then the kept data changes in order.
        let mut contents: HashMap<u64, Vec<u8>> = HashMap::new();
        for node in names.values() {
            if let Node::File(inode) = node {
                contents.insert(*inode, state.inodes.get(inode).map(|i| i.durable.clone()).unwrap_or_default());
            }
        }
        let mut pieces = pieces.into_iter().peekable();
        for (index, change) in changes.iter().enumerate() {
            let Change::Data { inode, change } = change else { continue };
            let Some(data) = contents.get_mut(inode) else { continue };
            if kept[index] {
                apply_data(data, change);
            }
            if let (Some((torn_index, len)), DataChange::Write { offset, bytes }) = (torn, change) {
                if torn_index == index {
                    apply_data(data, &DataChange::Write { offset: *offset, bytes: bytes[..len].to_vec() });
                }
            }
            while let Some(&(piece_index, start, end)) = pieces.peek() {
                if piece_index != index {
                    break;
                }
                pieces.next();
                if let DataChange::Write { offset, bytes } = change {
                    apply_data(data, &DataChange::Write { offset: offset + start as u64, bytes: bytes[start..end].to_vec() });
                }
            }
        }
        let inodes = contents.into_iter().map(|(inode, data)| (inode, Inode { durable: data.clone(), data })).collect();
        let image = State {
            inodes,
            next_inode: state.next_inode,
            durable_names: names.clone(),
            names,
            unsynced: Vec::new(),
            operations: 0,
            crash_at: None,
            crashed: false,
        };
        CrashFs { state: Arc::new(Mutex::new(image)) }
    }

    /// Every file's path and current contents, for diagnostics.
    pub fn files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let state = self.state.lock();
        state
            .names
            .iter()
            .filter_map(|(path, node)| match node {
                Node::File(inode) => Some((path.clone(), state.inodes.get(inode).map(|i| i.data.clone()).unwrap_or_default())),
                Node::Dir => None,
            })
            .collect()
    }

    fn handle(&self, inode: u64) -> Arc<dyn StorageFile> {
        Arc::new(CrashFile { state: self.state.clone(), inode })
    }
}

/// An open file of a [`CrashFs`]; it keeps working on its inode after a rename or removal.
struct CrashFile {
    state: Arc<Mutex<State>>,
    inode: u64,
}

impl StorageFile for CrashFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut state = self.state.lock();
        state.alive()?;
        let data = &state.inode(self.inode).data;
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(data.len());
        let len = buf.len().min(data.len() - start);
        buf[..len].copy_from_slice(&data[start..start + len]);
        Ok(len)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut state = self.state.lock();
        state.operate()?;
        let change = DataChange::Write { offset, bytes: buf.to_vec() };
        apply_data(&mut state.inode(self.inode).data, &change);
        state.unsynced.push(Change::Data { inode: self.inode, change });
        Ok(buf.len())
    }
    fn sync_data(&self) -> io::Result<()> {
        self.state.lock().sync_file(self.inode)
    }
    fn len(&self) -> io::Result<u64> {
        let mut state = self.state.lock();
        state.alive()?;
        Ok(state.inode(self.inode).data.len() as u64)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        state.operate()?;
        let change = DataChange::SetLen(len);
        apply_data(&mut state.inode(self.inode).data, &change);
        state.unsynced.push(Change::Data { inode: self.inode, change });
        Ok(())
    }
}

impl FileSystem for CrashFs {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let inode = self.state.lock().new_file(path)?;
        Ok(self.handle(inode))
    }
    fn open_rw(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let inode = self.state.lock().file_at(path)?;
        Ok(self.handle(inode))
    }
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.open_rw(path)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.operate()?;
        match state.names.get(path) {
            Some(Node::File(_)) => {}
            Some(Node::Dir) => return Err(io::Error::other(format!("{} is a directory", path.display()))),
            None => return Err(not_found(path)),
        }
        state.names.remove(path);
        state.unsynced.push(Change::Name(NameChange::Remove(path.to_path_buf())));
        Ok(())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.operate()?;
        let Some(node @ Node::File(_)) = state.names.get(from).copied() else { return Err(not_found(from)) };
        if !state.parent_is_dir(to) {
            return Err(not_found(to));
        }
        state.names.remove(from);
        state.names.insert(to.to_path_buf(), node);
        state.unsynced.push(Change::Name(NameChange::Rename { from: from.to_path_buf(), to: to.to_path_buf() }));
        Ok(())
    }
    fn exists(&self, path: &Path) -> bool {
        let state = self.state.lock();
        !state.crashed && state.names.contains_key(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let state = self.state.lock();
        state.alive()?;
        if state.names.get(dir) != Some(&Node::Dir) {
            return Err(not_found(dir));
        }
        Ok(state.names.keys().filter(|path| path.parent() == Some(dir)).cloned().collect())
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        let missing: Vec<PathBuf> = dir.ancestors().take_while(|d| !state.names.contains_key(*d)).map(Path::to_path_buf).collect();
        for path in missing.into_iter().rev() {
            state.operate()?;
            if state.names.get(path.parent().unwrap_or(Path::new(""))) != Some(&Node::Dir) {
                return Err(not_found(&path));
            }
            state.names.insert(path.clone(), Node::Dir);
            state.unsynced.push(Change::Name(NameChange::Mkdir(path)));
        }
        match state.names.get(dir) {
            Some(Node::Dir) => Ok(()),
            _ => Err(io::Error::other(format!("{} is not a directory", dir.display()))),
        }
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.state.lock().sync_directory(dir)
    }
    fn space(&self, _dir: &Path) -> io::Result<DiskSpace> {
        let state = self.state.lock();
        state.alive()?;
        let used: u64 = state.inodes.values().map(|i| i.data.len() as u64).sum();
        const TOTAL: u64 = 1 << 40;
        Ok(DiskSpace { total_bytes: TOTAL, available_bytes: TOTAL.saturating_sub(used) })
    }
}

#[cfg(test)]
mod tests;
