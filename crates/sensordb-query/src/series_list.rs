//! A store's list of series ([`crate::Storage::series`]) with what queries derive from it: the
//! runs of one tag set, the distinct field names, and which tag sets carry a given tag value.
//! They are derived once, on first use, and kept with the list: a store keeps a list between
//! queries while its series do not change, and a lookup of one truck among 9,000 series spent a
//! third of its CPU walking and comparing every tag set and field name of the list.

use crate::storage::StoredSeries;
// foldhash instead of the standard SipHash: the index is rebuilt whenever the list changes (a
// growing fleet at 600,000 series spent a quarter of that in SipHash and rehashing), and its keys
// are tag texts already accepted and stored; foldhash's per-map random seed still keeps
// collisions from being chosen in advance.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// Series sorted by measurement, tag set and field (see [`crate::Storage::series`]).
#[derive(Debug, Default)]
pub struct SeriesList {
    series: Vec<StoredSeries>,
    derived: OnceLock<Derived>,
}

#[derive(Debug)]
struct Derived {
    /// Each tag set's series, in list order (a list of one measurement; see [`SeriesList::tag_sets`]).
    tag_sets: Vec<Range<usize>>,
    /// Distinct field names, sorted; the series' own shared names.
    field_names: Vec<Arc<str>>,
    /// Tag key, then value: the tag sets (indexes into `tag_sets`) that carry it, ascending.
    by_tag: HashMap<String, HashMap<String, Vec<u32>>>,
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
        SeriesList { series, derived: OnceLock::new() }
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
    pub fn tag_sets_with(&self, key: &str, value: &str) -> impl Iterator<Item = &[StoredSeries]> + '_ {
        let derived = self.derived();
        let sets = derived.by_tag.get(key).and_then(|values| values.get(value)).map_or(&[][..], Vec::as_slice);
        sets.iter().map(move |&set| &self.series[derived.tag_sets[set as usize].clone()])
    }

    /// The distinct field names, sorted.
    pub fn field_names(&self) -> &[Arc<str>] {
        &self.derived().field_names
    }

    /// The distinct tag keys, sorted.
    pub fn tag_keys(&self) -> &[String] {
        &self.derived().tag_keys
    }
}

impl std::ops::Deref for SeriesList {
    type Target = [StoredSeries];

    fn deref(&self) -> &[StoredSeries] {
        &self.series
    }
}

fn derive(series: &[StoredSeries]) -> Derived {
    let mut tag_sets: Vec<Range<usize>> = Vec::new();
    let mut by_tag: HashMap<String, HashMap<String, Vec<u32>>> = HashMap::default();
    let mut start = 0;
    while start < series.len() {
        let tags = &series[start].tags;
        // The engine's list shares one allocation per tag set: mostly a pointer comparison.
        let length = series[start..].iter().take_while(|s| Arc::ptr_eq(&s.tags, tags) || s.tags == *tags).count();
        let set = u32::try_from(tag_sets.len()).expect("fewer than 2^32 tag sets in one list");
        for (key, value) in tags.iter() {
            by_tag.entry_ref(key).entry_ref(value).push(set);
        }
        tag_sets.push(start..start + length);
        start += length;
    }
    let field_names = crate::select::distinct_sorted(series.iter().map(|s| &s.field)).into_iter().cloned().collect();
    let mut tag_keys: Vec<String> = by_tag.keys().cloned().collect();
    tag_keys.sort_unstable();
    Derived { tag_sets, field_names, by_tag, tag_keys }
}

/// `entry` by a borrowed key, allocating the owned key only when it is new.
trait EntryRef<V> {
    fn entry_ref(&mut self, key: &str) -> &mut V;
}

impl<V: Default> EntryRef<V> for HashMap<String, V> {
    fn entry_ref(&mut self, key: &str) -> &mut V {
        if !self.contains_key(key) {
            self.insert(key.to_string(), V::default());
        }
        self.get_mut(key).expect("inserted above")
    }
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
}
