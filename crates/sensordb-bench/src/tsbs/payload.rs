//! The waveform payload generator: portions of noisy sine samples per sensor, for byte-payload
//! workloads (what the parent's TSBS-like generator does for floats).

use super::iot::{normal, uniform, NANOS_PER_SECOND, TSBS_DEFAULT_START};
use crate::row::{Row, TagSet};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sensordb_engine::{Timestamp, Value};
use std::sync::Arc;

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
