//! What the TSBS IoT use case is made of: its usual start time, the measurements with their
//! fields and tags, how capacities appear in rows, the trucks with their random-walk signals,
//! and the random draws those walks (and the payload generator's waves) take. The generators
//! of the parent module build rows out of these.

use crate::row::{SeriesMap, TagSet};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use sensordb_engine::{SeriesKey, SeriesKeyError, Timestamp};
use std::sync::Arc;

/// 2016-01-01T00:00:00Z, TSBS's usual start, in ns.
pub const TSBS_DEFAULT_START: Timestamp = 1_451_606_400_000_000_000;
pub(super) const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// How TSBS's numeric truck "tags" (load_capacity, fuel_capacity, nominal_fuel_consumption)
/// appear in rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityEncoding {
    /// As the first three float fields of every row, as TSBS's InfluxDB output has them.
    Fields,
    /// As tags with the values formatted like TSBS does ("1500", "150", "12").
    Tags,
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

pub(super) const FLEETS: [&str; 4] = ["East", "West", "North", "South"];
pub(super) const DRIVERS: [&str; 6] = ["Derek", "Rodney", "Albert", "Andy", "Seth", "Trish"];
pub(super) const DEVICE_VERSIONS: [&str; 4] = ["v1.0", "v1.5", "v2.0", "v2.3"];
/// (model, load capacity, fuel capacity, nominal fuel consumption)
pub(super) const MODELS: [(&str, f64, f64, f64); 3] =
    [("F-150", 2000.0, 200.0, 15.0), ("G-2000", 5000.0, 300.0, 19.0), ("H-2", 1500.0, 150.0, 12.0)];
/// TSBS clamps of the random walks: (min, max) per readings field.
pub const READINGS_CLAMPS: [(f64, f64); 7] =
    [(-90.0, 90.0), (-180.0, 180.0), (0.0, 5000.0), (0.0, 100.0), (0.0, 360.0), (0.0, 100.0), (0.0, 50.0)];
/// Decimals kept per readings field.
pub const READINGS_DECIMALS: [usize; 7] = [5, 5, 0, 0, 0, 0, 1];
/// TSBS clamps per diagnostics field (current_load is not a walk but stays in [0, 5000)).
pub const DIAGNOSTICS_CLAMPS: [(f64, f64); 3] = [(0.0, 1.0), (0.0, 5000.0), (0.0, 5.0)];
pub const DIAGNOSTICS_DECIMALS: [usize; 3] = [1, 0, 0];
pub(super) const POW10: [f64; 6] = [1.0, 10.0, 100.0, 1_000.0, 10_000.0, 100_000.0];
/// Fields counted by TSBS when it draws which field to drop (the most of any measurement).
pub(super) const MAX_FIELD_COUNT: usize = 7;
/// Tags counted by TSBS when it draws which tag to drop (5 strings + 3 capacities).
pub(super) const TAG_COUNT: usize = 8;

/// TSBS's float precision cut: truncation toward zero to `decimals` places.
pub(super) fn cut(value: f64, decimals: usize) -> f64 {
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
    pub(super) fn capacities(&self) -> [f64; 3] {
        [self.load_capacity, self.fuel_capacity, self.nominal_fuel_consumption]
    }

    /// The tag set with tag `i` (in TSBS order, 0..8) left out when bit `i` of `dropped` is set.
    pub(super) fn tags(&self, capacities: CapacityEncoding, dropped: u8) -> Vec<(String, String)> {
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
    pub(super) readings: Arc<str>,
    pub(super) diagnostics: Arc<str>,
    /// Capacity field names, then readings field names, then diagnostics field names.
    pub(super) field_names: Vec<Arc<str>>,
}

impl Fleet {
    /// The interned name of a measurement, as rows carry it.
    pub fn measurement_name(&self, measurement: Measurement) -> &Arc<str> {
        match measurement {
            Measurement::Readings => &self.readings,
            Measurement::Diagnostics => &self.diagnostics,
        }
    }

    pub(super) fn capacity_name(&self, i: usize) -> &Arc<str> {
        &self.field_names[i]
    }

    pub(super) fn field_name(&self, measurement: Measurement, i: usize) -> &Arc<str> {
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
pub(super) struct TruckState {
    pub(super) readings: [f64; 7],
    pub(super) fuel_state: f64,
    pub(super) current_load: f64,
    pub(super) status: f64,
}

pub(super) fn uniform(rng: &mut ChaCha8Rng, low: f64, high: f64) -> f64 {
    rng.gen::<f64>() * (high - low) + low
}

/// Standard normal draw (Box–Muller; `rand_distr` is not a dependency).
pub(super) fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let u2 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

pub(super) const READINGS_STEPS: [f64; 7] = [0.005, 0.005, 10.0, 10.0, 5.0, 5.0, 5.0];

impl TruckState {
    pub(super) fn tick(&mut self, rng: &mut ChaCha8Rng) {
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

    pub(super) fn values(&self, measurement: Measurement) -> [f64; 7] {
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
