//! The manifest of a rewrite with several outputs: which outputs replace which segments, made
//! durable before the first output is renamed into place, so that start-up finishes the
//! renames of a rewrite a crash interrupted instead of keeping some outputs and dropping the
//! others (whose blocks the inputs, removed because a kept output names them, would no longer
//! hold). A rewrite with one output needs none: its rename is the one step.
//!
//! Layout (docs/FORMAT.md, "Rewrite manifest"), little-endian:
//!
//! ```text
//! magic "SDBRWMF\0" | version u16 = 1 | outputs u32 | output ids u64... | replaced u32 |
//! replaced ids u64... | CRC32C u32 of everything before it
//! ```
//!
//! Written as `<id>.rewrite.tmp`, synced, renamed to `<id>.rewrite` (`id`: the first output),
//! the directory synced; removed once the outputs are installed and the inputs removed.

use crate::checksum::crc32c;
use crate::error::{Error, Result};
use crate::filenames::{rewrite_manifest, temporary_rewrite_manifest};
use crate::fs::FileSystem;
use std::path::Path;

const MAGIC: &[u8; 8] = b"SDBRWMF\0";
const VERSION: u16 = 1;
/// More ids than any rewrite has: a length beyond it is damage, not a reason to allocate.
const IDS_MAX: u32 = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RewriteManifest {
    /// Ascending.
    pub outputs: Vec<u64>,
    /// Ascending.
    pub replaced: Vec<u64>,
}

impl RewriteManifest {
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(22 + 8 * (self.outputs.len() + self.replaced.len()));
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        for ids in [&self.outputs, &self.replaced] {
            bytes.extend_from_slice(&(ids.len() as u32).to_le_bytes());
            for id in ids {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
        }
        let checksum = crc32c(&bytes);
        bytes.extend_from_slice(&checksum.to_le_bytes());
        bytes
    }

    /// Decodes a manifest read from `path`; damage is reported with the offset where it shows.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<RewriteManifest> {
        let damaged = |offset: usize, what: &str| Error::corruption(path, offset as u64, format!("rewrite manifest: {what}"));
        if bytes.len() < MAGIC.len() + 2 + 4 + 4 + 4 {
            return Err(damaged(0, "too short"));
        }
        let (body, checksum) = bytes.split_at(bytes.len() - 4);
        if crc32c(body) != u32::from_le_bytes(checksum.try_into().expect("4 bytes")) {
            return Err(damaged(body.len(), "checksum mismatch"));
        }
        if &body[..MAGIC.len()] != MAGIC {
            return Err(damaged(0, "not a rewrite manifest"));
        }
        let version = u16::from_le_bytes([body[8], body[9]]);
        if version != VERSION {
            return Err(Error::UnsupportedVersion { path: path.to_path_buf(), found: version, supported: VERSION });
        }
        let mut at = 10;
        let mut list = || -> Result<Vec<u64>> {
            let count = body.get(at..at + 4).ok_or_else(|| damaged(at, "truncated"))?;
            let count = u32::from_le_bytes(count.try_into().expect("4 bytes"));
            if count > IDS_MAX {
                return Err(damaged(at, "impossible id count"));
            }
            at += 4;
            let end = at + 8 * count as usize;
            let ids = body.get(at..end).ok_or_else(|| damaged(at, "truncated"))?;
            at = end;
            Ok(ids.chunks_exact(8).map(|id| u64::from_le_bytes(id.try_into().expect("8 bytes"))).collect())
        };
        let (outputs, replaced) = (list()?, list()?);
        if at != body.len() {
            return Err(damaged(at, "bytes after the lists"));
        }
        Ok(RewriteManifest { outputs, replaced })
    }

    /// Writes the manifest durably (when `sync`) under the name of its first output.
    pub fn write(&self, fs: &dyn FileSystem, dir: &Path, sync: bool) -> Result<()> {
        let first = *self.outputs.first().expect("BUG: a rewrite manifest without outputs");
        let (temporary, path) = (temporary_rewrite_manifest(dir, first), rewrite_manifest(dir, first));
        let file = fs.create(&temporary).map_err(|e| Error::io(&temporary, e))?;
        let written = file.write_all_at(&self.encode(), 0).and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        drop(file);
        if let Err(e) = written {
            let _ = fs.remove(&temporary);
            return Err(Error::io(&temporary, e));
        }
        fs.rename(&temporary, &path).map_err(|e| Error::io(&temporary, e))?;
        if sync {
            fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
        }
        Ok(())
    }

    /// Reads the manifest at `path`.
    pub fn read(fs: &dyn FileSystem, path: &Path) -> Result<RewriteManifest> {
        let file = fs.open_read(path).map_err(|e| Error::io(path, e))?;
        let length = file.len().map_err(|e| Error::io(path, e))?;
        if length > u64::from(IDS_MAX) * 16 + 64 {
            return Err(Error::corruption(path, 0, "rewrite manifest: impossibly long"));
        }
        let mut bytes = vec![0u8; length as usize];
        file.read_exact_at(&mut bytes, 0).map_err(|e| Error::io(path, e))?;
        RewriteManifest::decode(&bytes, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn manifests_round_trip_and_any_damage_is_caught(
            outputs in proptest::collection::vec(any::<u64>(), 1..6),
            replaced in proptest::collection::vec(any::<u64>(), 0..9),
            flip in any::<(usize, u8)>(),
            cut in any::<usize>(),
        ) {
            let manifest = RewriteManifest { outputs, replaced };
            let bytes = manifest.encode();
            let path = Path::new("00000000000000000007.rewrite");
            prop_assert_eq!(RewriteManifest::decode(&bytes, path).expect("decodes"), manifest);
            let mut damaged = bytes.clone();
            let (at, bits) = (flip.0 % bytes.len(), flip.1.max(1));
            damaged[at] ^= bits;
            prop_assert!(RewriteManifest::decode(&damaged, path).is_err(), "a flipped byte at {} passed", at);
            let cut = cut % bytes.len();
            prop_assert!(RewriteManifest::decode(&bytes[..cut], path).is_err(), "cut at {} passed", cut);
        }
    }

    #[test]
    fn a_manifest_is_written_under_its_first_output_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = RewriteManifest { outputs: vec![12, 13, 14], replaced: vec![3, 5, 8] };
        manifest.write(&crate::fs::RealFs, dir.path(), true).expect("write");
        let path = rewrite_manifest(dir.path(), 12);
        assert_eq!(RewriteManifest::read(&crate::fs::RealFs, &path).expect("read"), manifest);
        assert!(!temporary_rewrite_manifest(dir.path(), 12).exists());
        std::fs::write(&path, b"SDBRWMF\0\x02\0").expect("damage");
        assert!(matches!(RewriteManifest::read(&crate::fs::RealFs, &path), Err(Error::Corruption { .. })));
    }
}
