//! Workload generators and benchmark runners (in progress).
