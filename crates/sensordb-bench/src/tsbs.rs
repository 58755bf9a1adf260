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
//!
//! This file holds the generator and its defects; `iot` the use case's trucks, signals and
//! constants, `payload` the waveform payload generator for byte workloads.

mod iot;
mod payload;

pub use iot::{
    CapacityEncoding, Fleet, Measurement, Truck, CAPACITY_FIELDS, DIAGNOSTICS_CLAMPS, DIAGNOSTICS_DECIMALS, DIAGNOSTICS_FIELDS,
    READINGS_CLAMPS, READINGS_DECIMALS, READINGS_FIELDS, STRING_TAGS, TSBS_DEFAULT_START,
};
pub use payload::{PayloadConfig, PayloadGenerator};

use iot::{TruckState, DEVICE_VERSIONS, DRIVERS, FLEETS, MAX_FIELD_COUNT, MODELS, NANOS_PER_SECOND, TAG_COUNT};

use crate::row::{Row, TagSet};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sensordb_engine::{Timestamp, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

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

#[cfg(test)]
mod tests;
