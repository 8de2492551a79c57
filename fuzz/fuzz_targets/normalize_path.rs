//! Any string: normalisation either refuses or yields a canonical path that re-normalises to
//! itself.
#![no_main]

use craik_kernel::TargetPath;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &str| {
    if let Ok(path) = TargetPath::normalize("/w", raw) {
        assert_eq!(TargetPath::normalize("/w", path.as_str()).as_ref(), Ok(&path));
        assert!(!path.segments().any(|s| s.is_empty() || s == "." || s == ".."));
    }
});
