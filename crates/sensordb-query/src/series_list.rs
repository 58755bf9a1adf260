//! A store's list of series ([`crate::Storage::series`]) with what queries derive from it: the
//! runs of one tag set, the distinct field names, and which tag sets carry a given tag value.
//! They are derived once, on first use, and kept with the list: a store keeps a list between
//! queries while its series do not change, and a lookup of one truck among 9,000 series spent a
//! third of its CPU walking and comparing every tag set and field name of the list.

use crate::storage::StoredSeries;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// Series sorted by measurement, tag set and field (see [`crate::Storage::series`]).
#[derive(Debug, Default)]
pub struct SeriesList {
    series: Vec<StoredSeries>,
    derived: OnceLock<Derived>,
    /// The whole measurement's field names and tag keys, for a list of part of its series
    /// ([`SeriesList::part_of_measurement`]).
    whole: Option<(Vec<Arc<str>>, Vec<String>)>,
}

#[derive(Debug)]
struct Derived {
    /// Each tag set's series, in list order (a list of one measurement; see [`SeriesList::tag_sets`]).
    tag_sets: Vec<Range<usize>>,
    /// Distinct field names, sorted; the series' own shared names.
    field_names: Vec<Arc<str>>,
    /// Each distinct tag key (sorted) with the tag sets (indexes into `tag_sets`) that carry
    /// it, each with a hash of its value, sorted by hash and then by index; made for a key when
    /// a query first looks one of its values up. A list is derived again whenever the series
    /// change (a growing fleet: with every new device), and one map of every key and value made
    /// that cost 130 ms at 600,000 series, mostly hashing and allocating the values. Sorted by
    /// the values themselves, every step of a lookup's binary search followed two pointers to
    /// compare strings (4 µs of a TSBS single-last-loc query, looked up twice); the hashes are
    /// searched in one array, and only the sets found compare their values.
    by_tag: BTreeMap<String, OnceLock<Vec<(u64, u32)>>>,
    /// Distinct tag keys, sorted.
    tag_keys: Vec<String>,
}

impl SeriesList {
    /// `series` must be sorted by measurement, tag set and field.
    pub fn new(series: Vec<StoredSeries>) -> SeriesList {
        debug_assert!(
            series.windows(2).all(|w| (&w[0].measurement, &w[0].tags, &w[0].field) < (&w[1].measurement, &w[1].tags, &w[1].field)),
            "a series list is sorted by measurement, tag set and field, without repeats"
        );
        SeriesList { series, derived: OnceLock::new(), whole: None }
    }

    /// A list of some of a measurement's series (`series`, sorted as [`SeriesList::new`]
    /// wants) that answers [`SeriesList::field_names`] and [`SeriesList::tag_keys`] with the
    /// whole measurement's (`field_names` and `tag_keys`, sorted and distinct): a query over
    /// it then tells fields from tags, and lays out columns and groups, as over the whole list.
    pub fn part_of_measurement(series: Vec<StoredSeries>, field_names: Vec<Arc<str>>, tag_keys: Vec<String>) -> SeriesList {
        assert!(field_names.windows(2).all(|w| w[0] < w[1]) && tag_keys.windows(2).all(|w| w[0] < w[1]), "names sorted and distinct");
        debug_assert!(
            series
                .iter()
                .all(|s| field_names.binary_search(&s.field).is_ok() && s.tags.iter().all(|(k, _)| tag_keys.binary_search(k).is_ok())),
            "the part's names are among the whole measurement's"
        );
        SeriesList { whole: Some((field_names, tag_keys)), ..SeriesList::new(series) }
    }

    pub fn series(&self) -> &[StoredSeries] {
        &self.series
    }

    fn derived(&self) -> &Derived {
        self.derived.get_or_init(|| derive(&self.series))
    }

    /// The series of each tag set, in list order. Meant for a list of one measurement (a tag
    /// set of several measurements would be one run per measurement).
    pub fn tag_sets(&self) -> impl ExactSizeIterator<Item = &[StoredSeries]> + '_ {
        self.derived().tag_sets.iter().map(|run| &self.series[run.clone()])
    }

    /// The tag sets where tag `key` is `value` (not empty: no tag set carries an empty value).
    pub fn tag_sets_with<'s, 'q>(&'s self, key: &'q str, value: &'q str) -> impl Iterator<Item = &'s [StoredSeries]> + use<'s, 'q> {
        let derived = self.derived();
        let sets = match derived.by_tag.get(key) {
            Some(index) => {
                let sets = index.get_or_init(|| self.sets_by_value(key));
                let hash = value_hash(value);
                let from = sets.partition_point(|&(h, _)| h < hash);
                let to = from + sets[from..].partition_point(|&(h, _)| h == hash);
                &sets[from..to]
            }
            None => &[][..],
        };
        sets.iter()
            .filter(move |&&(_, set)| self.value_in(set, key) == value)
            .map(move |&(_, set)| &self.series[derived.tag_sets[set as usize].clone()])
    }

    /// The value of `key` in tag set `set` ("" where the set lacks the key).
    fn value_in(&self, set: u32, key: &str) -> &str {
        let tags = &self.series[self.derived().tag_sets[set as usize].start].tags;
        tags.binary_search_by(|(k, _)| k.as_str().cmp(key)).map_or("", |at| tags[at].1.as_str())
    }

    /// The tag sets carrying `key` with the hash of its value, sorted by hash; of equal hashes
    /// in list order.
    fn sets_by_value(&self, key: &str) -> Vec<(u64, u32)> {
        let count = u32::try_from(self.derived().tag_sets.len()).expect("fewer than 2^32 tag sets in one list");
        let mut sets: Vec<(u64, u32)> = (0..count)
            .filter_map(|set| {
                let value = self.value_in(set, key);
                (!value.is_empty()).then(|| (value_hash(value), set))
            })
            .collect();
        sets.sort_unstable();
        sets
    }

    /// The distinct field names, sorted.
    pub fn field_names(&self) -> &[Arc<str>] {
        match &self.whole {
            Some((field_names, _)) => field_names,
            None => &self.derived().field_names,
        }
    }

    /// The distinct tag keys, sorted.
    pub fn tag_keys(&self) -> &[String] {
        match &self.whole {
            Some((_, tag_keys)) => tag_keys,
            None => &self.derived().tag_keys,
        }
    }
}

impl std::ops::Deref for SeriesList {
    type Target = [StoredSeries];

    fn deref(&self) -> &[StoredSeries] {
        &self.series
    }
}

/// The hash a tag value is indexed by (the same for the life of the process).
fn value_hash(value: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x5e45_04db).hash_one(value)
}

fn derive(series: &[StoredSeries]) -> Derived {
    let mut tag_sets: Vec<Range<usize>> = Vec::new();
    let mut by_tag: BTreeMap<String, OnceLock<Vec<(u64, u32)>>> = BTreeMap::new();
    let mut start = 0;
    let mut keys_before: Option<&Arc<[(String, String)]>> = None;
    while start < series.len() {
        let tags = &series[start].tags;
        // The engine's list shares one allocation per tag set: mostly a pointer comparison.
        let length = series[start..].iter().take_while(|s| Arc::ptr_eq(&s.tags, tags) || s.tags == *tags).count();
        // Tag sets of one measurement mostly have the same keys as the set before.
        let same_keys =
            keys_before.is_some_and(|before| before.len() == tags.len() && before.iter().zip(tags.iter()).all(|(a, b)| a.0 == b.0));
        if !same_keys {
            for (key, _) in tags.iter() {
                if !by_tag.contains_key(key) {
                    by_tag.insert(key.clone(), OnceLock::new());
                }
            }
            keys_before = Some(tags);
        }
        tag_sets.push(start..start + length);
        start += length;
    }
    assert!(u32::try_from(tag_sets.len()).is_ok(), "fewer than 2^32 tag sets in one list");
    let field_names = crate::select::distinct_sorted(series.iter().map(|s| &s.field)).into_iter().cloned().collect();
    let tag_keys: Vec<String> = by_tag.keys().cloned().collect();
    Derived { tag_sets, field_names, by_tag, tag_keys }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::FieldKind;

    fn series(handle: u64, tags: &Arc<[(String, String)]>, field: &str) -> StoredSeries {
        StoredSeries { handle, measurement: Arc::from("m"), tags: tags.clone(), field: Arc::from(field), kind: FieldKind::Float }
    }

    fn tags(pairs: &[(&str, &str)]) -> Arc<[(String, String)]> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn tag_sets_fields_and_tag_values_of_a_list() {
        let a = tags(&[("fleet", "North"), ("name", "t1")]);
        // Equal to `a` but another allocation: still one tag set.
        let a2 = tags(&[("fleet", "North"), ("name", "t1")]);
        let b = tags(&[("fleet", "North"), ("name", "t2")]);
        let c = tags(&[("fleet", "South")]);
        let list = SeriesList::new(vec![
            series(0, &a, "lat"),
            series(1, &a2, "lon"),
            series(2, &b, "lat"),
            series(3, &c, "lat"),
            series(4, &c, "speed"),
        ]);
        let handles = |sets: Vec<&[StoredSeries]>| sets.iter().map(|s| s.iter().map(|s| s.handle).collect::<Vec<_>>()).collect::<Vec<_>>();
        assert_eq!(handles(list.tag_sets().collect()), vec![vec![0, 1], vec![2], vec![3, 4]]);
        assert_eq!(handles(list.tag_sets_with("fleet", "North").collect()), vec![vec![0, 1], vec![2]]);
        assert_eq!(handles(list.tag_sets_with("name", "t2").collect()), vec![vec![2]]);
        assert!(list.tag_sets_with("name", "t3").next().is_none());
        assert!(list.tag_sets_with("driver", "x").next().is_none());
        let fields: Vec<&str> = list.field_names().iter().map(|f| &**f).collect();
        assert_eq!(fields, ["lat", "lon", "speed"]);
        assert_eq!(list.tag_keys(), ["fleet", "name"]);
        assert_eq!(list.len(), 5);
    }

    #[test]
    fn values_of_a_later_key_are_found_across_the_list_in_list_order() {
        let sets: Vec<Arc<[(String, String)]>> = [("A", "z"), ("B", "a"), ("C", "z"), ("D", "m")]
            .iter()
            .map(|(fleet, name)| tags(&[("fleet", fleet), ("name", name)]))
            .chain([tags(&[("fleet", "E")])])
            .collect();
        let list = SeriesList::new(sets.iter().enumerate().map(|(i, set)| series(i as u64, set, "lat")).collect());
        let handles = |key: &str, value: &str| list.tag_sets_with(key, value).map(|s| s[0].handle).collect::<Vec<_>>();
        assert_eq!(handles("name", "z"), [0, 2]);
        assert_eq!(handles("name", "a"), [1]);
        assert_eq!(handles("name", "m"), [3]);
        assert_eq!(handles("name", "b"), Vec::<u64>::new());
        assert_eq!(handles("name", ""), Vec::<u64>::new(), "a set without the key is not one with an empty value");
        assert_eq!(handles("fleet", "E"), [4]);
    }

    /// Tag sets whose values hash alike are told apart by their values.
    #[test]
    fn a_value_lookup_compares_the_values_of_equal_hashes() {
        let sets: Vec<Arc<[(String, String)]>> =
            [("A", "z"), ("B", "a"), ("C", "z")].iter().map(|(fleet, name)| tags(&[("fleet", fleet), ("name", name)])).collect();
        let list = SeriesList::new(sets.iter().enumerate().map(|(i, set)| series(i as u64, set, "lat")).collect());
        // An index as a collision would make it: "a" filed under the hash of "z".
        let z = value_hash("z");
        assert!(list.derived().by_tag["name"].set(vec![(z, 0), (z, 1), (z, 2)]).is_ok(), "the index is not made yet");
        let handles: Vec<u64> = list.tag_sets_with("name", "z").map(|s| s[0].handle).collect();
        assert_eq!(handles, [0, 2]);
        assert_eq!(list.tag_sets_with("name", "a").count(), 0, "not under its own hash");
    }
}
