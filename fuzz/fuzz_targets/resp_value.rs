//! Fuzzes the value decoder: any bytes must decode, fail, or ask for more without
//! panicking; a decoded value must re-encode to a fixed point and render without
//! panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_resp::decode;

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Ok(Some((value, consumed))) => {
            assert!(consumed > 0 && consumed <= data.len());
            let encoded = value.to_bytes();
            let (again, used) = decode(&encoded)
                .expect("an encoded value decodes")
                .expect("an encoded value is complete");
            assert_eq!(used, encoded.len());
            assert_eq!(again.to_bytes(), encoded);
            let _ = format!("{value} {value:?}");
            // The decoder reads left to right, so any strict prefix is incomplete.
            assert_eq!(decode(&data[..consumed - 1]), Ok(None));
        }
        Ok(None) | Err(_) => {}
    }
});
