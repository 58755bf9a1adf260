//! A seeded, reproducible generator modelled on the TSBS IoT use case (`--use-case=iot`).
//!
//! It owns the fleet of trucks, their random-walk signals, and the TSBS delivery defects
//! (missing points, fields and tags; out-of-order entries and batches). Identical [`TsbsConfig`]
//! (including the seed) gives identical rows; the random source is ChaCha8, so the numbers are
//! not TSBS's own (Go's `math/rand`), only their statistics are.
//!
//! What is modelled, after TSBS's `pkg/data/usecases/iot` and `pkg/data/usecases/common`:
//!
//! - Trucks `truck_0..truck_{N-1}`, tags name, fleet (East/West/North/South), driver (6 names),
//!   model (F-150 / G-2000 / H-2, which fixes load_capacity 2000/5000/1500,
//!   fuel_capacity 200/300/150, nominal_fuel_consumption 15/19/12) and device_version
//!   (v1.0/v1.5/v2.0/v2.3).
//!   TSBS keeps the three capacities as float "tags", which its InfluxDB serializer writes as
//!   the first three *fields* of every line; [`CapacityEncoding`] picks either form, fields by
//!   default so that rows match real TSBS line-protocol files.
//! - `readings`: latitude, longitude (±0.005 steps, clamped to ±90 / ±180, start uniform in
//!   [0, 90) / [0, 180), 5 decimals), elevation (±10 steps in [0, 5000], start in [0, 500),
//!   0 decimals), velocity (±10 in [0, 100], start 0), heading (±5 in [0, 360], start in
//!   [0, 360)), grade (±5 in [0, 100], start 0), fuel_consumption (±5 in [0, 50], start 25,
//!   1 decimal). All floats.
//! - `diagnostics`: fuel_state (steps uniform in [-0.001, 0) from 1.0 in [0, 1], refilled to 1
//!   when it hits 0, 1 decimal), current_load (with 5 % chance per tick a new uniform value in
//!   [0, 5000), starts 0, 0 decimals), status (integer; normal(0, 1) steps clamped to [0, 5],
//!   start 0).
//! - Decimals are cut the TSBS way: truncation toward zero, `trunc(x * 10^d) / 10^d`.
//! - The base stream is, per epoch (one interval), readings of trucks 0..N then diagnostics of
//!   trucks 0..N, every truck advancing all signals once per epoch; epochs = (end - start) /
//!   interval.
//! - Defects, in batches of 10 entries of that stream ([`Disorder`], TSBS's chances by
//!   default): a whole batch is lost (1 %); a batch is held back (5 %) and delivered later (each
//!   later batch, with 50 % chance, is a held-back one instead); an entry is lost (10 %); an
//!   entry is held back (30 %) and re-inserted into a later batch (each slot re-inserts a
//!   held-back entry with 50 % chance while there are some); one field is dropped from an entry
//!   (10 %; index drawn in 0..7, modulo the measurement's field count) and one of the 8 tags
//!   (1 %; a dropped capacity tag is a dropped capacity field in the fields encoding). Whatever
//!   is held back when the stream ends is delivered at the end.
//!   Lateness is bounded in practice: a held-back item is re-inserted with probability ≥ 1/2
//!   per following batch.

use crate::row::{Row, SeriesMap, TagSet};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sensordb_engine::{SeriesKey, SeriesKeyError, Timestamp, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// 2016-01-01T00:00:00Z, TSBS's usual start, in ns.
pub const TSBS_DEFAULT_START: Timestamp = 1_451_606_400_000_000_000;
const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// How TSBS's numeric truck "tags" (load_capacity, fuel_capacity, nominal_fuel_consumption)
/// appear in rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityEncoding {
    /// As the first three float fields of every row, as TSBS's InfluxDB output has them.
    Fields,
    /// As tags with the values formatted like TSBS does ("1500", "150", "12").
    Tags,
}

/// Chances of the delivery defects, per batch and per entry. [`Disorder::default`] is TSBS's.
#[derive(Clone, Debug, PartialEq)]
pub struct Disorder {
    pub batch_size: usize,
    pub missing_batch: f64,
    pub out_of_order_batch: f64,
    pub insert_previous_batch: f64,
    pub missing_entry: f64,
    pub out_of_order_entry: f64,
    pub insert_previous_entry: f64,
    pub zero_field: f64,
    pub zero_tag: f64,
}

impl Default for Disorder {
    fn default() -> Self {
        Disorder {
            batch_size: 10,
            missing_batch: 0.01,
            out_of_order_batch: 0.05,
            insert_previous_batch: 0.5,
            missing_entry: 0.1,
            out_of_order_entry: 0.3,
            insert_previous_entry: 0.5,
            zero_field: 0.1,
            zero_tag: 0.01,
        }
    }
}

impl Disorder {
    /// No defects: every entry complete and in order.
    pub fn none() -> Self {
        Disorder {
            missing_batch: 0.0,
            out_of_order_batch: 0.0,
            insert_previous_batch: 0.0,
            missing_entry: 0.0,
            out_of_order_entry: 0.0,
            insert_previous_entry: 0.0,
            zero_field: 0.0,
            zero_tag: 0.0,
            ..Disorder::default()
        }
    }
}

/// Parameters of a generated TSBS-IoT-like data set.
#[derive(Clone, Debug, PartialEq)]
pub struct TsbsConfig {
    /// Number of trucks (TSBS `--scale`).
    pub scale: u32,
    /// First timestamp, ns since the Unix epoch.
    pub start: Timestamp,
    /// End, exclusive, ns. The number of epochs is `(end - start) / interval`.
    pub end: Timestamp,
    /// Time between two readings of one truck, ns (TSBS `--log-interval`).
    pub interval: i64,
    pub seed: u64,
    pub capacities: CapacityEncoding,
    pub disorder: Disorder,
}

impl Default for TsbsConfig {
    /// 100 trucks, 2016-01-01 for one day, 10 s interval, seed 123, TSBS defects.
    fn default() -> Self {
        TsbsConfig {
            scale: 100,
            start: TSBS_DEFAULT_START,
            end: TSBS_DEFAULT_START + 86_400 * NANOS_PER_SECOND,
            interval: 10 * NANOS_PER_SECOND,
            seed: 123,
            capacities: CapacityEncoding::Fields,
            disorder: Disorder::default(),
        }
    }
}

impl TsbsConfig {
    /// Sets `end` to `start + duration` (ns).
    pub fn with_duration(mut self, duration: i64) -> Self {
        self.end = self.start.saturating_add(duration);
        self
    }

    /// Number of epochs (intervals) generated.
    pub fn epochs(&self) -> u64 {
        if self.interval <= 0 || self.end <= self.start {
            return 0;
        }
        ((self.end - self.start) / self.interval) as u64
    }

    /// Entries of the base stream before defects: epochs × trucks × 2 measurements.
    pub fn base_entries(&self) -> u64 {
        self.epochs() * u64::from(self.scale) * 2
    }
}

/// The measurements of the IoT use case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Measurement {
    Readings,
    Diagnostics,
}

impl Measurement {
    pub fn name(self) -> &'static str {
        match self {
            Measurement::Readings => "readings",
            Measurement::Diagnostics => "diagnostics",
        }
    }

    /// The signal fields, in TSBS order (without the capacity fields).
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Measurement::Readings => &READINGS_FIELDS,
            Measurement::Diagnostics => &DIAGNOSTICS_FIELDS,
        }
    }
}

pub const READINGS_FIELDS: [&str; 7] = ["latitude", "longitude", "elevation", "velocity", "heading", "grade", "fuel_consumption"];
pub const DIAGNOSTICS_FIELDS: [&str; 3] = ["fuel_state", "current_load", "status"];
pub const CAPACITY_FIELDS: [&str; 3] = ["load_capacity", "fuel_capacity", "nominal_fuel_consumption"];
/// The string tags, in TSBS order.
pub const STRING_TAGS: [&str; 5] = ["name", "fleet", "driver", "model", "device_version"];

const FLEETS: [&str; 4] = ["East", "West", "North", "South"];
const DRIVERS: [&str; 6] = ["Derek", "Rodney", "Albert", "Andy", "Seth", "Trish"];
const DEVICE_VERSIONS: [&str; 4] = ["v1.0", "v1.5", "v2.0", "v2.3"];
/// (model, load capacity, fuel capacity, nominal fuel consumption)
const MODELS: [(&str, f64, f64, f64); 3] = [("F-150", 2000.0, 200.0, 15.0), ("G-2000", 5000.0, 300.0, 19.0), ("H-2", 1500.0, 150.0, 12.0)];
/// TSBS clamps of the random walks: (min, max) per readings field.
pub const READINGS_CLAMPS: [(f64, f64); 7] =
    [(-90.0, 90.0), (-180.0, 180.0), (0.0, 5000.0), (0.0, 100.0), (0.0, 360.0), (0.0, 100.0), (0.0, 50.0)];
/// Decimals kept per readings field.
pub const READINGS_DECIMALS: [usize; 7] = [5, 5, 0, 0, 0, 0, 1];
/// TSBS clamps per diagnostics field (current_load is not a walk but stays in [0, 5000)).
pub const DIAGNOSTICS_CLAMPS: [(f64, f64); 3] = [(0.0, 1.0), (0.0, 5000.0), (0.0, 5.0)];
pub const DIAGNOSTICS_DECIMALS: [usize; 3] = [1, 0, 0];
const POW10: [f64; 6] = [1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0];
/// Fields counted by TSBS when it draws which field to drop (the most of any measurement).
const MAX_FIELD_COUNT: usize = 7;
/// Tags counted by TSBS when it draws which tag to drop (5 strings + 3 capacities).
const TAG_COUNT: usize = 8;

/// TSBS's float precision cut: truncation toward zero to `decimals` places.
fn cut(value: f64, decimals: usize) -> f64 {
    let scale = POW10[decimals.min(5)];
    ((value * scale) as i64) as f64 / scale
}

/// The static description of one truck.
#[derive(Clone, Debug, PartialEq)]
pub struct Truck {
    pub name: String,
    pub fleet: &'static str,
    pub driver: &'static str,
    pub model: &'static str,
    pub device_version: &'static str,
    pub load_capacity: f64,
    pub fuel_capacity: f64,
    pub nominal_fuel_consumption: f64,
}

impl Truck {
    fn capacities(&self) -> [f64; 3] {
        [self.load_capacity, self.fuel_capacity, self.nominal_fuel_consumption]
    }

    /// The tag set with tag `i` (in TSBS order, 0..8) left out when bit `i` of `dropped` is set.
    fn tags(&self, capacities: CapacityEncoding, dropped: u8) -> Vec<(String, String)> {
        let strings = [self.name.as_str(), self.fleet, self.driver, self.model, self.device_version];
        let mut tags: Vec<(String, String)> = STRING_TAGS
            .iter()
            .zip(strings)
            .enumerate()
            .filter(|(i, _)| dropped & (1 << i) == 0)
            .map(|(_, (k, v))| ((*k).to_string(), v.to_string()))
            .collect();
        if capacities == CapacityEncoding::Tags {
            for (i, (key, value)) in CAPACITY_FIELDS.iter().zip(self.capacities()).enumerate() {
                if dropped & (1 << (i + 5)) == 0 {
                    tags.push(((*key).to_string(), format!("{value}")));
                }
            }
        }
        tags
    }
}

/// The trucks of a generated data set with their full tag sets (tag set id = truck index).
#[derive(Clone, Debug)]
pub struct Fleet {
    pub trucks: Vec<Truck>,
    pub tag_sets: Vec<Arc<TagSet>>,
    readings: Arc<str>,
    diagnostics: Arc<str>,
    /// Capacity field names, then readings field names, then diagnostics field names.
    field_names: Vec<Arc<str>>,
}

impl Fleet {
    /// The interned name of a measurement, as rows carry it.
    pub fn measurement_name(&self, measurement: Measurement) -> &Arc<str> {
        match measurement {
            Measurement::Readings => &self.readings,
            Measurement::Diagnostics => &self.diagnostics,
        }
    }

    fn capacity_name(&self, i: usize) -> &Arc<str> {
        &self.field_names[i]
    }

    fn field_name(&self, measurement: Measurement, i: usize) -> &Arc<str> {
        match measurement {
            Measurement::Readings => &self.field_names[3 + i],
            Measurement::Diagnostics => &self.field_names[10 + i],
        }
    }

    /// Every field name a row of `measurement` can carry under `capacities`.
    pub fn row_fields(&self, measurement: Measurement, capacities: CapacityEncoding) -> Vec<Arc<str>> {
        let mut names = Vec::new();
        if capacities == CapacityEncoding::Fields {
            names.extend((0..3).map(|i| self.capacity_name(i).clone()));
        }
        names.extend((0..measurement.fields().len()).map(|i| self.field_name(measurement, i).clone()));
        names
    }

    /// Precomputes the series keys of every truck's full tag set: each truck's series, once.
    /// Rows whose tag was dropped (TSBS's zeroed tags, about 1 % of rows) add their keys on first
    /// use through [`SeriesMap::flatten_keys_into`].
    pub fn series_keys(&self, capacities: CapacityEncoding) -> Result<SeriesMap<Arc<SeriesKey>>, SeriesKeyError> {
        let mut map = SeriesMap::new();
        for tags in &self.tag_sets {
            for measurement in [Measurement::Readings, Measurement::Diagnostics] {
                let name = self.measurement_name(measurement);
                for field in self.row_fields(measurement, capacities) {
                    map.get_or_insert_with(tags, name, &field, |key| Ok::<_, SeriesKeyError>(Arc::new(key)))?;
                }
            }
        }
        Ok(map)
    }
}

/// Random-walk state of one truck.
#[derive(Clone, Debug)]
struct TruckState {
    readings: [f64; 7],
    fuel_state: f64,
    current_load: f64,
    status: f64,
}

fn uniform(rng: &mut ChaCha8Rng, low: f64, high: f64) -> f64 {
    rng.gen::<f64>() * (high - low) + low
}

/// Standard normal draw (Box–Muller; `rand_distr` is not a dependency).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let u2 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

const READINGS_STEPS: [f64; 7] = [0.005, 0.005, 10.0, 10.0, 5.0, 5.0, 5.0];

impl TruckState {
    fn tick(&mut self, rng: &mut ChaCha8Rng) {
        for ((state, step), (min, max)) in self.readings.iter_mut().zip(READINGS_STEPS).zip(READINGS_CLAMPS) {
            *state = (*state + uniform(rng, -step, step)).clamp(min, max);
        }
        self.fuel_state = (self.fuel_state + uniform(rng, -0.001, 0.0)).clamp(0.0, 1.0);
        if self.fuel_state == 0.0 {
            self.fuel_state = 1.0; // refuel
        }
        if rng.gen::<f64>() >= 0.95 {
            self.current_load = uniform(rng, 0.0, 5000.0);
        }
        self.status = (self.status + normal(rng)).clamp(0.0, 5.0);
    }

    fn values(&self, measurement: Measurement) -> [f64; 7] {
        let mut out = [0.0; 7];
        match measurement {
            Measurement::Readings => {
                for (i, value) in out.iter_mut().enumerate() {
                    *value = cut(self.readings[i], READINGS_DECIMALS[i]);
                }
            }
            Measurement::Diagnostics => {
                out[0] = cut(self.fuel_state, 1);
                out[1] = cut(self.current_load, 0);
                out[2] = cut(self.status, 0);
            }
        }
        out
    }
}

/// One entry of the base stream, with the defects applied to it so far.
#[derive(Clone, Debug)]
struct Entry {
    truck: u32,
    measurement: Measurement,
    epoch: u64,
    values: [f64; 7],
    /// Bit i: signal field i dropped.
    dropped_fields: u8,
    /// Bit i: tag i (TSBS order, capacities at 5..8) dropped.
    dropped_tags: u8,
}

struct Base {
    states: Vec<TruckState>,
    epochs: u64,
    epoch: u64,
    measurement: usize,
    truck: usize,
    made: u64,
    max: u64,
}

impl Base {
    fn finished(&self) -> bool {
        self.made >= self.max
    }

    fn next(&mut self, rng: &mut ChaCha8Rng) -> Option<Entry> {
        if self.finished() || self.states.is_empty() {
            return None;
        }
        if self.truck == self.states.len() {
            self.truck = 0;
            self.measurement += 1;
        }
        if self.measurement == 2 {
            self.measurement = 0;
            self.epoch += 1;
            for state in &mut self.states {
                state.tick(rng);
            }
        }
        debug_assert!(self.epoch < self.epochs);
        let measurement = if self.measurement == 0 { Measurement::Readings } else { Measurement::Diagnostics };
        let entry = Entry {
            truck: self.truck as u32,
            measurement,
            epoch: self.epoch,
            values: self.states[self.truck].values(measurement),
            dropped_fields: 0,
            dropped_tags: 0,
        };
        self.truck += 1;
        self.made += 1;
        Some(entry)
    }
}

/// Defects drawn for one batch (TSBS's `batchConfig`).
#[derive(Default)]
struct BatchPlan {
    insert_previous: bool,
    missing: bool,
    out_of_order: bool,
    zero_field: Vec<Option<usize>>,
    zero_tag: Vec<Option<usize>>,
    insert_previous_entry: Vec<bool>,
    missing_entry: Vec<bool>,
    out_of_order_entry: Vec<bool>,
}

/// Iterator of [`Row`]s of a TSBS-IoT-like data set. See the module documentation.
pub struct TsbsGenerator {
    config: TsbsConfig,
    fleet: Fleet,
    rng: ChaCha8Rng,
    base: Base,
    plan: BatchPlan,
    current: VecDeque<Entry>,
    held_batches: VecDeque<Vec<Entry>>,
    held_entries: VecDeque<Entry>,
    /// Tag sets with dropped tags, by (truck, dropped-tag mask), made on first use.
    partial_tag_sets: HashMap<(u32, u8), Arc<TagSet>>,
    next_tag_set_id: u32,
}

impl TsbsGenerator {
    pub fn new(config: TsbsConfig) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let mut trucks = Vec::with_capacity(config.scale as usize);
        let mut states = Vec::with_capacity(config.scale as usize);
        for i in 0..config.scale {
            // Same draw order as TSBS: measurements' initial states, then the tags.
            let mut readings = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 25.0];
            readings[0] = rng.gen::<f64>() * 90.0;
            readings[1] = rng.gen::<f64>() * 180.0;
            readings[2] = rng.gen::<f64>() * 500.0;
            readings[4] = rng.gen::<f64>() * 360.0;
            states.push(TruckState { readings, fuel_state: 1.0, current_load: 0.0, status: 0.0 });
            let (model, load_capacity, fuel_capacity, nominal_fuel_consumption) = MODELS[rng.gen_range(0..MODELS.len())];
            trucks.push(Truck {
                name: format!("truck_{i}"),
                fleet: FLEETS[rng.gen_range(0..FLEETS.len())],
                driver: DRIVERS[rng.gen_range(0..DRIVERS.len())],
                model,
                device_version: DEVICE_VERSIONS[rng.gen_range(0..DEVICE_VERSIONS.len())],
                load_capacity,
                fuel_capacity,
                nominal_fuel_consumption,
            });
        }
        let tag_sets =
            trucks.iter().enumerate().map(|(i, truck)| Arc::new(TagSet { id: i as u32, tags: truck.tags(config.capacities, 0) })).collect();
        let field_names =
            CAPACITY_FIELDS.iter().chain(READINGS_FIELDS.iter()).chain(DIAGNOSTICS_FIELDS.iter()).map(|name| Arc::from(*name)).collect();
        let fleet = Fleet { trucks, tag_sets, readings: Arc::from("readings"), diagnostics: Arc::from("diagnostics"), field_names };
        let base = Base { states, epochs: config.epochs(), epoch: 0, measurement: 0, truck: 0, made: 0, max: config.base_entries() };
        TsbsGenerator {
            next_tag_set_id: config.scale,
            config,
            fleet,
            rng,
            base,
            plan: BatchPlan::default(),
            current: VecDeque::new(),
            held_batches: VecDeque::new(),
            held_entries: VecDeque::new(),
            partial_tag_sets: HashMap::new(),
        }
    }

    pub fn config(&self) -> &TsbsConfig {
        &self.config
    }

    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.gen::<f64>() < p
    }

    /// Draws the defects of the next batch, in TSBS's order.
    fn plan_batch(&mut self) {
        let d = self.config.disorder.clone();
        let mut plan = std::mem::take(&mut self.plan);
        plan.insert_previous = false;
        plan.out_of_order = false;
        plan.missing = self.chance(d.missing_batch);
        for v in [&mut plan.insert_previous_entry, &mut plan.missing_entry, &mut plan.out_of_order_entry] {
            v.clear();
            v.resize(d.batch_size, false);
        }
        for v in [&mut plan.zero_field, &mut plan.zero_tag] {
            v.clear();
            v.resize(d.batch_size, None);
        }
        if !plan.missing {
            plan.out_of_order = self.chance(d.out_of_order_batch);
            if !self.held_batches.is_empty() {
                plan.insert_previous = self.chance(d.insert_previous_batch);
            }
            let mut held = self.held_entries.len();
            for i in 0..d.batch_size {
                if held > 0 && self.chance(d.insert_previous_entry) {
                    plan.insert_previous_entry[i] = true;
                    held -= 1;
                }
                if self.chance(d.missing_entry) {
                    plan.missing_entry[i] = true;
                    continue;
                }
                if self.chance(d.zero_field) {
                    plan.zero_field[i] = Some(self.rng.gen_range(0..MAX_FIELD_COUNT));
                }
                if self.chance(d.zero_tag) {
                    plan.zero_tag[i] = Some(self.rng.gen_range(0..TAG_COUNT));
                }
                if self.chance(d.out_of_order_entry) {
                    plan.out_of_order_entry[i] = true;
                }
            }
        }
        self.plan = plan;
    }

    /// The entry for batch slot `index` (TSBS's `getNextEntry`), or `None` when the base stream
    /// is exhausted.
    fn next_entry(&mut self, index: usize, offset: &mut usize) -> Option<Entry> {
        loop {
            let slot = index + *offset;
            let entry = if self.plan.insert_previous_entry.get(slot).copied().unwrap_or(false) {
                match self.held_entries.pop_front() {
                    Some(entry) => entry,
                    None => self.base.next(&mut self.rng)?,
                }
            } else {
                self.base.next(&mut self.rng)?
            };
            if self.plan.missing_entry.get(slot).copied().unwrap_or(false) {
                *offset += 1;
                continue;
            }
            if self.plan.out_of_order_entry.get(slot).copied().unwrap_or(false) {
                self.held_entries.push_back(entry);
                *offset += 1;
                continue;
            }
            return Some(entry);
        }
    }

    fn generate_batch(&mut self) -> Vec<Entry> {
        let size = self.config.disorder.batch_size;
        let mut batch = Vec::with_capacity(size);
        let mut offset = 0;
        for i in 0..size {
            if self.base.finished() {
                break;
            }
            let Some(mut entry) = self.next_entry(i, &mut offset) else {
                break;
            };
            if let Some(index) = self.plan.zero_field[i] {
                entry.dropped_fields |= 1 << (index % entry.measurement.fields().len());
            }
            if let Some(index) = self.plan.zero_tag[i] {
                entry.dropped_tags |= 1 << index;
            }
            batch.push(entry);
        }
        batch
    }

    /// Refills `current` (TSBS's `simulateNextBatch`); false when everything was delivered.
    fn next_batch(&mut self) -> bool {
        loop {
            if self.base.finished() {
                if let Some(batch) = self.held_batches.pop_front() {
                    self.current.extend(batch);
                    return true;
                }
                if self.held_entries.is_empty() {
                    return false;
                }
                let take = self.config.disorder.batch_size.max(1).min(self.held_entries.len());
                let rest = self.held_entries.split_off(take);
                self.current.extend(std::mem::replace(&mut self.held_entries, rest));
                return true;
            }
            if self.config.disorder.batch_size == 0 {
                // No batching: the plain base stream.
                if let Some(entry) = self.base.next(&mut self.rng) {
                    self.current.push_back(entry);
                    return true;
                }
                continue;
            }
            self.plan_batch();
            if self.plan.insert_previous {
                if let Some(batch) = self.held_batches.pop_front() {
                    self.current.extend(batch);
                    return true;
                }
            }
            if self.plan.missing {
                for _ in 0..self.config.disorder.batch_size {
                    if self.base.next(&mut self.rng).is_none() {
                        break;
                    }
                }
                continue;
            }
            let batch = self.generate_batch();
            if self.plan.out_of_order {
                if !batch.is_empty() {
                    self.held_batches.push_back(batch);
                }
                continue;
            }
            if !batch.is_empty() {
                self.current.extend(batch);
                return true;
            }
        }
    }

    fn tag_set(&mut self, truck: u32, dropped_tags: u8) -> Arc<TagSet> {
        let relevant = match self.config.capacities {
            CapacityEncoding::Fields => dropped_tags & 0b1_1111,
            CapacityEncoding::Tags => dropped_tags,
        };
        if relevant == 0 {
            return self.fleet.tag_sets[truck as usize].clone();
        }
        let next_id = &mut self.next_tag_set_id;
        let fleet = &self.fleet;
        let capacities = self.config.capacities;
        self.partial_tag_sets
            .entry((truck, relevant))
            .or_insert_with(|| {
                let id = *next_id;
                *next_id += 1;
                Arc::new(TagSet { id, tags: fleet.trucks[truck as usize].tags(capacities, relevant) })
            })
            .clone()
    }

    fn make_row(&mut self, entry: Entry) -> Row {
        let measurement = entry.measurement;
        let signal_count = measurement.fields().len();
        let mut fields = Vec::with_capacity(3 + signal_count);
        if self.config.capacities == CapacityEncoding::Fields {
            let capacities = self.fleet.trucks[entry.truck as usize].capacities();
            for (i, value) in capacities.into_iter().enumerate() {
                if entry.dropped_tags & (1 << (i + 5)) == 0 {
                    fields.push((self.fleet.capacity_name(i).clone(), Value::F64(value)));
                }
            }
        }
        for (i, value) in entry.values[..signal_count].iter().enumerate() {
            if entry.dropped_fields & (1 << i) != 0 {
                continue;
            }
            let value = if measurement == Measurement::Diagnostics && i == 2 { Value::I64(*value as i64) } else { Value::F64(*value) };
            fields.push((self.fleet.field_name(measurement, i).clone(), value));
        }
        Row {
            measurement: self.fleet.measurement_name(measurement).clone(),
            tags: self.tag_set(entry.truck, entry.dropped_tags),
            fields,
            timestamp: self.config.start + entry.epoch as i64 * self.config.interval,
        }
    }
}

impl Iterator for TsbsGenerator {
    type Item = Row;

    fn next(&mut self) -> Option<Row> {
        loop {
            if let Some(entry) = self.current.pop_front() {
                let row = self.make_row(entry);
                // TSBS skips a line whose every field was dropped.
                if row.fields.is_empty() {
                    continue;
                }
                return Some(row);
            }
            if !self.next_batch() {
                return None;
            }
        }
    }
}

/// Parameters of the waveform payload generator.
#[derive(Clone, Debug, PartialEq)]
pub struct PayloadConfig {
    /// Number of sensors (`sensor_0..`).
    pub sensors: u32,
    /// Bytes per portion; rounded down to whole i16 samples.
    pub portion_bytes: usize,
    /// Portions per sensor.
    pub portions: u64,
    pub start: Timestamp,
    /// Time between two portions of one sensor, ns.
    pub interval: i64,
    pub seed: u64,
    /// Standard deviation of the added noise, in sample units (LSB). Larger is less compressible.
    pub noise: f64,
}

impl Default for PayloadConfig {
    fn default() -> Self {
        PayloadConfig {
            sensors: 16,
            portion_bytes: 4096,
            portions: 1000,
            start: TSBS_DEFAULT_START,
            interval: NANOS_PER_SECOND,
            seed: 123,
            noise: 40.0,
        }
    }
}

struct Wave {
    amplitude: f64,
    /// Radians per sample.
    step: f64,
    phase: f64,
    harmonic: f64,
}

/// Iterator of waveform portions: rows of measurement `waveform`, tag `sensor`, one bytes field
/// `samples` holding little-endian i16 samples of a noisy sine with a harmonic (smooth, so
/// partly compressible), continuous across a sensor's portions. Ordered by time, then sensor.
pub struct PayloadGenerator {
    config: PayloadConfig,
    rng: ChaCha8Rng,
    waves: Vec<Wave>,
    tag_sets: Vec<Arc<TagSet>>,
    measurement: Arc<str>,
    field: Arc<str>,
    portion: u64,
    sensor: usize,
}

impl PayloadGenerator {
    pub fn new(config: PayloadConfig) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let waves = (0..config.sensors)
            .map(|_| Wave {
                amplitude: uniform(&mut rng, 2_000.0, 20_000.0),
                step: std::f64::consts::TAU / uniform(&mut rng, 20.0, 400.0),
                phase: uniform(&mut rng, 0.0, std::f64::consts::TAU),
                harmonic: uniform(&mut rng, 0.0, 0.3),
            })
            .collect();
        let tag_sets =
            (0..config.sensors).map(|i| Arc::new(TagSet { id: i, tags: vec![("sensor".to_string(), format!("sensor_{i}"))] })).collect();
        PayloadGenerator {
            config,
            rng,
            waves,
            tag_sets,
            measurement: Arc::from("waveform"),
            field: Arc::from("samples"),
            portion: 0,
            sensor: 0,
        }
    }

    /// The tag sets of the sensors (tag set id = sensor index).
    pub fn tag_sets(&self) -> &[Arc<TagSet>] {
        &self.tag_sets
    }
}

impl Iterator for PayloadGenerator {
    type Item = Row;

    fn next(&mut self) -> Option<Row> {
        if self.config.sensors == 0 || self.portion >= self.config.portions {
            return None;
        }
        let samples = self.config.portion_bytes / 2;
        let mut bytes = Vec::with_capacity(samples * 2);
        let noise = self.config.noise;
        let wave = &mut self.waves[self.sensor];
        for _ in 0..samples {
            let clean = wave.amplitude * (wave.phase.sin() + wave.harmonic * (3.0 * wave.phase).sin());
            let sample = (clean + noise * normal(&mut self.rng)).round().clamp(-32768.0, 32767.0) as i16;
            bytes.extend_from_slice(&sample.to_le_bytes());
            wave.phase = (wave.phase + wave.step) % std::f64::consts::TAU;
        }
        let row = Row {
            measurement: self.measurement.clone(),
            tags: self.tag_sets[self.sensor].clone(),
            fields: vec![(self.field.clone(), Value::Bytes(bytes.into()))],
            timestamp: self.config.start + self.portion as i64 * self.config.interval,
        };
        self.sensor += 1;
        if self.sensor == self.config.sensors as usize {
            self.sensor = 0;
            self.portion += 1;
        }
        Some(row)
    }
}

#[cfg(test)]
mod tests;
