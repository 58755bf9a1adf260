//! The process's allocator: mimalloc (v3), tuned to give memory back to the system soon.
//!
//! Against glibc's malloc, mimalloc halved the CPU of answers made of many small objects (the
//! latest value of 10,000 sensors: 18-24 -> 9-11 ms a request) and cut the TSBS load's CPU per
//! value by a fifth; but with its defaults (transparent huge pages, unused memory purged after
//! 1 s) the TSBS load's peak RSS rose from 92 to 166-175 MiB. Transparent huge pages are what
//! cost the memory: with them off, purging after 1 s gives a peak of 126 MiB, after 100 ms 108
//! MiB. The 1 s delay is kept for what it saves: pages purged after 100 ms were faulted in
//! again by the next batch or answer, so the load took 12 % more CPU (system time 0.8 s against
//! 0.5 s), and a dashboard's request after a pause 1-3 ms more (docs/BENCHMARKS.md). An
//! environment variable `MIMALLOC_<OPTION>` set by the user wins over these settings.

use libmimalloc_sys as mi;
use std::os::raw::c_long;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc 3's option numbers (`mi_option_t` in its mimalloc.h); libmimalloc-sys names only
// older ones. A test checks each against its documented default, so a renumbering shows.
const PURGE_DELAY: mi::mi_option_t = 15;
const ALLOW_THP: mi::mi_option_t = 43;

/// (option, the environment variable that overrides it, our value).
const SETTINGS: [(mi::mi_option_t, &str, c_long); 2] = [(ALLOW_THP, "MIMALLOC_ALLOW_THP", 0), (PURGE_DELAY, "MIMALLOC_PURGE_DELAY", 1000)];

/// Applies [`SETTINGS`]; called first thing in `main`.
pub fn tune() {
    for (option, variable, value) in SETTINGS {
        if std::env::var_os(variable).is_none() {
            // SAFETY: setting an option is allowed at any time; these are read when memory is
            // mapped or purged.
            unsafe { mi::mi_option_set(option, value) };
        }
    }
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // mimalloc turns THP off for the process only at its own start, before `main`: the same
        // call now covers every page faulted in from here on.
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_numbers_are_mimalloc_3s() {
        // SAFETY: reading options.
        let defaults = unsafe { [mi::mi_option_get(PURGE_DELAY), mi::mi_option_get(ALLOW_THP)] };
        let from_environment = SETTINGS.iter().any(|(_, variable, _)| std::env::var_os(variable).is_some());
        if !from_environment {
            assert_eq!(defaults, [1000, 1], "purge delay 1 s, THP allowed");
        }
        tune();
        for (option, variable, value) in SETTINGS {
            if std::env::var_os(variable).is_none() {
                // SAFETY: reading an option.
                assert_eq!(unsafe { mi::mi_option_get(option) }, value, "{variable}");
            }
        }
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
            // SAFETY: prctl with integer arguments only.
            assert_eq!(unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) }, 1, "THP off for the process");
        }
    }
}
