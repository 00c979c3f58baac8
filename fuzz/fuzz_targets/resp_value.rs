//! Fuzzes the value decoder: any bytes must decode, fail, or ask for more without
//! panicking; a decoded value must re-encode to a fixed point and render without
//! panicking; the allocation-free scanner must agree with the decoder.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_resp::{DecodeError, decode, scan};

fuzz_target!(|data: &[u8]| {
    let decoded = decode(data);
    if decoded != Err(DecodeError::TooDeep) {
        let measured = decoded.as_ref().map(|d| d.as_ref().map(|(_, n)| *n)).map_err(|e| *e);
        assert_eq!(scan(data).map(|f| f.map(|f| f.len)), measured);
    }
    match decoded {
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
