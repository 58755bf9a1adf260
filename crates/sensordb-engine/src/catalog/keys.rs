//! The catalog's in-memory key table: every series key text in one arena, found by a hash table
//! of ids.
//!
//! A series used to cost a parsed `SeriesKey` behind an `Arc` (seven allocations: the struct,
//! database, measurement, tag vector, tag names and values, field), a hash map entry keyed by
//! that `Arc` and a `SeriesEntry` in a vector: about 270 bytes at 2 M series. Here a series costs
//! its canonical text (appended to one byte arena), the end offset of that text (8 bytes), one
//! byte of kind and deletion flag, and a 4-byte id in a hash table (with its control byte and
//! free slots, 5-10 bytes): about 60 bytes for a 35-byte key. The table stores no hash and no
//! key: it hashes the arena text of an id when it must rehash, and a probe compares the arena
//! text, so a hash collision never confuses two keys.
//!
//! Parsed keys are made on demand (`SeriesKey::parse` of the text), for the callers that need
//! one; the write path never does.

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// Flag bit of a deleted series in `flags`; the low bits hold the value kind's byte.
const DELETED: u8 = 0x80;

/// Key texts by index (id - 1), and the live ones by text.
pub(super) struct KeyTable {
    /// Every key text, back to back, in index order (deleted ones too: an id keeps its key).
    arena: Vec<u8>,
    /// `ends[i]`: end of key `i` in `arena`; it starts where key `i - 1` ends.
    ends: Vec<u64>,
    /// Value kind byte of key `i`, with [`DELETED`] set once it is deleted.
    flags: Vec<u8>,
    /// Indices of the live keys, hashed by their text.
    live: HashTable<u32>,
    /// Seeded per table: key texts come from clients, who must not pick colliding ones.
    hasher: RandomState,
}

impl KeyTable {
    pub(super) fn new() -> Self {
        KeyTable { arena: Vec::new(), ends: Vec::new(), flags: Vec::new(), live: HashTable::new(), hasher: RandomState::default() }
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    fn span(ends: &[u64], index: usize) -> (usize, usize) {
        let start = if index == 0 { 0 } else { ends[index - 1] as usize };
        (start, ends[index] as usize)
    }

    /// The text of key `index` (any key pushed, deleted or not).
    pub(super) fn text(&self, index: usize) -> &str {
        let (start, end) = Self::span(&self.ends, index);
        // Only whole `&str`s are appended, and spans end where they ended.
        std::str::from_utf8(&self.arena[start..end]).expect("BUG: the key arena holds whole UTF-8 texts")
    }

    /// The kind byte of key `index`.
    pub(super) fn kind_byte(&self, index: usize) -> Option<u8> {
        self.flags.get(index).map(|f| f & !DELETED)
    }

    pub(super) fn is_deleted(&self, index: usize) -> bool {
        self.flags.get(index).is_some_and(|f| f & DELETED != 0)
    }

    /// The index of the live key `text`.
    pub(super) fn find(&self, text: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(text.as_bytes());
        let (arena, ends) = (&self.arena, &self.ends);
        self.live
            .find(hash, |&i| {
                let (start, end) = Self::span(ends, i as usize);
                &arena[start..end] == text.as_bytes()
            })
            .map(|&i| i as usize)
    }

    /// Appends a live key (the caller made sure no live key has this text); returns its index.
    pub(super) fn push(&mut self, text: &str, kind_byte: u8) -> usize {
        debug_assert!(kind_byte & DELETED == 0 && self.find(text).is_none());
        let index = self.ends.len();
        self.arena.extend_from_slice(text.as_bytes());
        self.ends.push(self.arena.len() as u64);
        self.flags.push(kind_byte);
        let hash = self.hasher.hash_one(text.as_bytes());
        let (arena, ends, hasher) = (&self.arena, &self.ends, &self.hasher);
        self.live.insert_unique(hash, index as u32, |&i| {
            let (start, end) = Self::span(ends, i as usize);
            hasher.hash_one(&arena[start..end])
        });
        index
    }

    /// [`KeyTable::push`] unless a live key has this text, in one probe of the table (loading
    /// a catalog of millions of keys probed twice, to find and then to insert): `Err` with
    /// the live key's index.
    pub(super) fn push_new(&mut self, text: &str, kind_byte: u8) -> Result<usize, usize> {
        debug_assert!(kind_byte & DELETED == 0);
        let hash = self.hasher.hash_one(text.as_bytes());
        let index = self.ends.len();
        let (arena, ends, hasher) = (&self.arena, &self.ends, &self.hasher);
        let entry = self.live.entry(
            hash,
            |&i| {
                let (start, end) = Self::span(ends, i as usize);
                &arena[start..end] == text.as_bytes()
            },
            |&i| {
                let (start, end) = Self::span(ends, i as usize);
                hasher.hash_one(&arena[start..end])
            },
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(found) => return Err(*found.get() as usize),
            hashbrown::hash_table::Entry::Vacant(vacant) => {
                vacant.insert(index as u32);
            }
        }
        self.arena.extend_from_slice(text.as_bytes());
        self.ends.push(self.arena.len() as u64);
        self.flags.push(kind_byte);
        Ok(index)
    }

    /// Room for `keys` more keys of `text_bytes` more text, so a load of a known size does not
    /// grow the arena and rehash the table again and again.
    pub(super) fn reserve(&mut self, keys: usize, text_bytes: usize) {
        self.arena.reserve(text_bytes);
        self.ends.reserve(keys);
        self.flags.reserve(keys);
        let (arena, ends, hasher) = (&self.arena, &self.ends, &self.hasher);
        self.live.reserve(keys, |&i| {
            let (start, end) = Self::span(ends, i as usize);
            hasher.hash_one(&arena[start..end])
        });
    }

    /// Marks key `index` deleted and frees its text for a new index. False when it was deleted
    /// already or does not exist.
    pub(super) fn delete(&mut self, index: usize) -> bool {
        if index >= self.len() || self.is_deleted(index) {
            return false;
        }
        let (start, end) = Self::span(&self.ends, index);
        let hash = self.hasher.hash_one(&self.arena[start..end]);
        if let Ok(entry) = self.live.find_entry(hash, |&i| i as usize == index) {
            entry.remove();
        }
        self.flags[index] |= DELETED;
        true
    }

    /// Heap bytes held (capacity, not length: what the process pays).
    pub(super) fn heap_bytes(&self) -> usize {
        self.arena.capacity() + self.ends.capacity() * 8 + self.flags.capacity() + self.live.allocation_size()
    }

    /// Gives back the spare capacity of the arena and the vectors (after loading a file).
    pub(super) fn shrink_to_fit(&mut self) {
        self.arena.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.flags.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn keys_are_found_by_text_and_kept_by_index() {
        let mut table = KeyTable::new();
        assert_eq!(table.push("cpu,host=a usage", 1), 0);
        assert_eq!(table.push("cpu,host=b usage", 2), 1);
        assert_eq!(table.push("", 3), 2, "an empty text is a text like any other");
        assert_eq!(table.find("cpu,host=a usage"), Some(0));
        assert_eq!(table.find("cpu,host=b usage"), Some(1));
        assert_eq!(table.find(""), Some(2));
        assert_eq!(table.find("cpu,host=c usage"), None);
        assert_eq!(table.find("cpu,host=a usag"), None, "a prefix is not the key");
        assert_eq!((table.text(1), table.kind_byte(1)), ("cpu,host=b usage", Some(2)));
        assert_eq!(table.kind_byte(3), None);
    }

    #[test]
    fn a_deleted_key_keeps_its_text_and_frees_it_for_a_new_index() {
        let mut table = KeyTable::new();
        table.push("m f", 1);
        table.push("m g", 1);
        assert!(table.delete(0));
        assert!(!table.delete(0), "deleted once only");
        assert!(!table.delete(7), "no such key");
        assert!(table.is_deleted(0) && !table.is_deleted(1));
        assert_eq!((table.text(0), table.kind_byte(0)), ("m f", Some(1)), "text and kind survive the deletion");
        assert_eq!(table.find("m f"), None);
        assert_eq!(table.push("m f", 4), 2);
        assert_eq!(table.find("m f"), Some(2));
        assert_eq!(table.find("m g"), Some(1));
    }

    #[test]
    fn push_new_refuses_a_live_text_and_takes_a_deleted_one() {
        let mut table = KeyTable::new();
        table.reserve(3, 20);
        assert_eq!(table.push_new("m f", 1), Ok(0));
        assert_eq!(table.push_new("m g", 2), Ok(1));
        assert_eq!(table.push_new("m f", 3), Err(0), "a live text keeps its index");
        assert_eq!(table.len(), 2, "nothing appended for a refused text");
        assert!(table.delete(0));
        assert_eq!(table.push_new("m f", 3), Ok(2));
        assert_eq!((table.find("m f"), table.find("m g")), (Some(2), Some(1)));
        assert_eq!((table.text(2), table.kind_byte(2)), ("m f", Some(3)));
        for i in 0..1_000 {
            assert_eq!(table.push_new(&format!("k{i}"), 1), Ok(3 + i), "past the reserved room the table grows");
        }
        assert_eq!(table.find("k999"), Some(1_002));
    }

    #[test]
    fn many_keys_cost_far_less_than_parsed_ones() {
        let mut table = KeyTable::new();
        let count = 100_000;
        for i in 0..count {
            table.push(&format!("bench sensor,device=d{i:07} temp"), 1);
        }
        table.shrink_to_fit();
        for i in (0..count).step_by(997) {
            assert_eq!(table.find(&format!("bench sensor,device=d{i:07} temp")), Some(i));
        }
        // 31 bytes of text, 9 of offset and flags, the table's slot: well under 64 per key.
        let per_key = table.heap_bytes() / count;
        assert!(per_key < 64, "{per_key} bytes per key");
    }

    proptest! {
        #[test]
        fn behaves_as_a_map_of_live_texts(operations in proptest::collection::vec((0u8..3, "[a-c]{0,3}", 1u8..6), 1..300)) {
            let mut table = KeyTable::new();
            let mut live: HashMap<String, usize> = HashMap::new();
            let mut all: Vec<(String, u8, bool)> = Vec::new();
            for (operation, text, kind) in operations {
                match operation {
                    0 | 1 if !live.contains_key(&text) => {
                        let index = table.push(&text, kind);
                        prop_assert_eq!(index, all.len());
                        live.insert(text.clone(), index);
                        all.push((text, kind, false));
                    }
                    _ => {
                        if let Some(index) = live.remove(&text) {
                            prop_assert!(table.delete(index));
                            all[index].2 = true;
                        }
                    }
                }
                for (index, (text, kind, deleted)) in all.iter().enumerate() {
                    prop_assert_eq!(table.text(index), text.as_str());
                    prop_assert_eq!(table.kind_byte(index), Some(*kind));
                    prop_assert_eq!(table.is_deleted(index), *deleted);
                    prop_assert_eq!(table.find(text), live.get(text).copied());
                }
            }
        }
    }
}
