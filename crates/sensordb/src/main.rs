//! The `sensordb` binary: server and CLI.
fn main() {
    println!("sensordb");
}
