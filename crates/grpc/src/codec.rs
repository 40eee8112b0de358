//! The node session's codec: prost, with small initial buffers. tonic's default gives every
//! stream an 8 KiB encode and an 8 KiB decode buffer up front; a session is long-lived and
//! mostly idle, so at ten thousand nodes those alone would be 160 MiB. The buffers still grow to
//! fit any message.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Each stream's initial encode and decode buffer: a status or an idle ping fits.
const BUFFER: usize = 1024;
/// How many encoded bytes a stream sends before it yields (tonic's default).
const YIELD_THRESHOLD: usize = 32 * 1024;

/// [`ProstCodec`] with [`BUFFER`]-byte initial buffers; the generated service and client use it.
#[derive(Debug, Clone)]
pub struct SessionCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SessionCodec<T, U> {
    fn default() -> Self {
        SessionCodec(PhantomData)
    }
}

impl<T, U> Codec for SessionCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::new(BUFFER, YIELD_THRESHOLD))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(BufferSettings::new(BUFFER, YIELD_THRESHOLD))
    }
}
