//! **Not API.** Internals that the fuzz targets (`fuzz/`), the benchmarks (`benches/`, `sensordb-bench`) and the
//! integration tests (`tests/`) drive directly: file formats decoded from arbitrary bytes, the
//! codecs and the memtable measured alone, fault injection. Hidden from the documentation and
//! free to change with any release; applications use the items at the crate root, [`crate::store`]
//! and [`crate::inspect`] instead.
//!
//! Each submodule mirrors the internal module it re-exports from and holds only what those
//! callers use.

/// Fault injection under the engine: a file system that fails writes on command, and one in
/// memory that simulates power loss.
pub mod fs {
    pub use crate::fs::{CrashFs, CrashMode, FaultyFs};
}

/// The series catalog file, opened alone by the catalog fuzz target.
pub mod catalog {
    pub use crate::catalog::Catalog;
}

/// The checksum the file formats use, to repair fuzzed inputs so they reach the parsers.
pub mod checksum {
    pub use crate::checksum::crc32c;
}

/// Block encoding and decoding (fuzz targets, seed generation).
pub mod block {
    pub use crate::block::{
        decode, decode_shared_timestamps, decode_with_shared, encode, encode_shared_timestamps, Block, BlockError, BlockHeader,
        TimestampColumn, FLAG_SHARED_TIMESTAMPS,
    };
}

/// Column codecs (fuzz targets, codec benchmarks), and the quick encoding flushes use (the
/// large-store builder encodes its short blocks as a flush would).
pub mod codec {
    pub use crate::codec::{decode_timestamps, decode_values, encode_timestamps, encode_values, with_quick_encoding};
}

/// Segment files read alone (fuzz targets), and written directly by the large-store builder
/// (`sensordb bench large-store`), which makes sealed segments without the write path.
pub mod segment {
    pub use crate::filenames::segment_dir;
    pub use crate::segment::{
        decode_directory, decode_run, encode_footer, read_all_runs, read_block, read_directory_chunks, read_run, scan_segment,
        scan_segment_directory, DirectoryIndex, EntryLayout, GroupBuilder, IndexEntry, RunShape, SegmentWriter, SeriesRun,
        SEGMENT_FORMAT_VERSION,
    };
}

/// The write-ahead log opened alone, and its record format (fuzz target, corruption tests).
pub mod wal {
    pub use crate::wal::{Wal, WalOptions};

    pub mod format {
        pub use crate::wal::format::{decode_record, RecordStep, HEADER_LEN};
    }
}

/// The memtable measured alone (benchmarks).
pub mod memtable {
    pub use crate::memtable::Memtable;
}
