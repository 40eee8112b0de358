//! SPDY/3.1 framing, as kubectl's SPDY client (moby/spdystream) speaks it, for the server side
//! of port-forward (over a WebSocket tunnel or a plain SPDY upgrade) and of exec and attach
//! over plain SPDY. No maintained Rust crate serves SPDY, so this is the subset those clients
//! use: data frames, SYN_STREAM / SYN_REPLY with header blocks compressed by one zlib stream per
//! direction (seeded with SPDY/3's dictionary, a sync flush ending each block), RST_STREAM,
//! PING, GOAWAY, and SETTINGS, HEADERS and WINDOW_UPDATE read and ignored: spdystream sends no
//! window updates and honours none, so this side keeps no send windows either.

use std::io;

use bytes::{Buf, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use tokio::io::{AsyncRead, AsyncReadExt};

/// SPDY/3's header-compression dictionary (draft-mbelshe-httpbis-spdy-00, 2.6.10.1).
const DICTIONARY: &[u8] = include_bytes!("spdy3.dict");

/// The largest frame read: more than any client of these protocols sends (kubectl's data
/// frames carry at most 32 KiB), bounding what one connection can make the server hold.
const MAX_FRAME: usize = 1 << 20;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const FLAG_FIN: u8 = 0x01;

/// RST_STREAM's status for a stream this side refuses.
pub(crate) const REFUSED_STREAM: u32 = 3;

/// A frame as this side reads or writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Data of a stream; `fin` half-closes it.
    Data {
        /// The stream.
        stream: u32,
        /// The bytes.
        data: Vec<u8>,
        /// The sender's last frame on the stream.
        fin: bool,
    },
    /// The peer opens a stream.
    SynStream {
        /// Its id (odd from a client).
        stream: u32,
        /// Its headers, names in lower case.
        headers: Vec<(String, String)>,
        /// Opened already half-closed.
        fin: bool,
    },
    /// The answer to a stream the peer opened.
    SynReply {
        /// The stream.
        stream: u32,
    },
    /// A stream is reset.
    RstStream {
        /// The stream.
        stream: u32,
        /// Why.
        status: u32,
    },
    /// A ping, echoed unchanged.
    Ping(u32),
    /// The sender opens no more streams.
    GoAway {
        /// The last stream it accepted.
        last: u32,
    },
    /// Anything else (SETTINGS, HEADERS, WINDOW_UPDATE, NOOP): read and ignored.
    Ignored,
}

impl Frame {
    /// The value of header `name` of a SYN_STREAM.
    pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

fn malformed(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// Reads frames from the client, decompressing header blocks with the client's zlib stream.
pub(crate) struct FrameReader<R> {
    io: R,
    inflate: Decompress,
    /// What was read of frames not yet answered.
    buffer: BytesMut,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames from `io`.
    pub(crate) fn new(io: R) -> FrameReader<R> {
        FrameReader { io, inflate: Decompress::new(true), buffer: BytesMut::new() }
    }

    /// The next frame; `None` at a clean end of the connection between frames. Safe to cancel
    /// (a `select!` branch that loses): what was read of a frame stays for the next call.
    pub(crate) async fn read(&mut self) -> io::Result<Option<Frame>> {
        loop {
            if let Some(frame) = self.take()? {
                return Ok(Some(frame));
            }
            if self.buffer.capacity() - self.buffer.len() < 4096 {
                self.buffer.reserve(8192);
            }
            if self.io.read_buf(&mut self.buffer).await? == 0 {
                if self.buffer.is_empty() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection ended inside a SPDY frame",
                ));
            }
        }
    }

    /// The first frame in the buffer, once it is all there.
    fn take(&mut self) -> io::Result<Option<Frame>> {
        let Some(head) = self.buffer.get(..8) else { return Ok(None) };
        let first = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let flags = head[4];
        let length = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
        if length > MAX_FRAME {
            return Err(malformed(format!("a SPDY frame of {length} bytes is larger than {MAX_FRAME}")));
        }
        if self.buffer.len() < 8 + length {
            self.buffer.reserve(8 + length - self.buffer.len());
            return Ok(None);
        }
        self.buffer.advance(8);
        let payload = self.buffer.split_to(length);
        if first & 0x8000_0000 == 0 {
            return Ok(Some(Frame::Data {
                stream: first & 0x7fff_ffff,
                data: payload.to_vec(),
                fin: flags & FLAG_FIN != 0,
            }));
        }
        let version = (first >> 16) & 0x7fff;
        if version != 3 {
            return Err(malformed(format!("SPDY version {version}; only 3 is spoken")));
        }
        let word = |at: usize| -> io::Result<u32> {
            payload
                .get(at..at + 4)
                .map(|bytes| u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
                .ok_or_else(|| malformed("a SPDY control frame shorter than its fields"))
        };
        Ok(Some(match (first & 0xffff) as u16 {
            SYN_STREAM => {
                let stream = word(0)? & 0x7fff_ffff;
                let block = payload.get(10..).ok_or_else(|| malformed("a SYN_STREAM without headers"))?;
                let headers = self.headers(block)?;
                Frame::SynStream { stream, headers, fin: flags & FLAG_FIN != 0 }
            }
            SYN_REPLY => Frame::SynReply { stream: word(0)? & 0x7fff_ffff },
            RST_STREAM => Frame::RstStream { stream: word(0)? & 0x7fff_ffff, status: word(4)? },
            PING => Frame::Ping(word(0)?),
            GOAWAY => Frame::GoAway { last: word(0)? & 0x7fff_ffff },
            _ => Frame::Ignored,
        }))
    }

    /// A header block: all of `block` decompressed (the client flushed at its end), then read
    /// as counted names and values.
    fn headers(&mut self, block: &[u8]) -> io::Result<Vec<(String, String)>> {
        let mut plain = Vec::with_capacity(block.len() * 4);
        let mut input = block;
        while !input.is_empty() {
            plain.reserve(4096);
            let before = self.inflate.total_in();
            match self.inflate.decompress_vec(input, &mut plain, FlushDecompress::Sync) {
                Ok(_) => {}
                Err(error) if error.needs_dictionary().is_some() => {
                    self.inflate.set_dictionary(DICTIONARY).map_err(|e| malformed(e.to_string()))?;
                }
                Err(error) => {
                    return Err(malformed(format!("a SPDY header block does not inflate: {error}")));
                }
            }
            let used = usize::try_from(self.inflate.total_in() - before).unwrap_or(input.len());
            input = &input[used..];
            if plain.len() > MAX_FRAME {
                return Err(malformed("a SPDY header block inflates past its bound"));
            }
        }
        parse_header_block(&plain)
    }
}

/// Counted name/value pairs: a 32-bit count, then each name and value with a 32-bit length.
/// Several values of one name are NUL-joined; the first is kept.
fn parse_header_block(mut plain: &[u8]) -> io::Result<Vec<(String, String)>> {
    let mut take = |count: usize| -> io::Result<&[u8]> {
        if plain.len() < count {
            return Err(malformed("a SPDY header block ends early"));
        }
        let (taken, rest) = plain.split_at(count);
        plain = rest;
        Ok(taken)
    };
    let number = |bytes: &[u8]| u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    let pairs = number(take(4)?);
    let mut headers = Vec::with_capacity(pairs.min(64));
    for _ in 0..pairs {
        let length = number(take(4)?);
        let name = String::from_utf8_lossy(take(length)?).to_ascii_lowercase();
        let length = number(take(4)?);
        let value = String::from_utf8_lossy(take(length)?);
        let value = value.split('\0').next().unwrap_or_default().to_owned();
        headers.push((name, value));
    }
    Ok(headers)
}

/// Encodes frames for the client, compressing header blocks with this side's zlib stream.
pub(crate) struct FrameWriter {
    deflate: Compress,
}

impl FrameWriter {
    /// A writer whose compressor starts from SPDY/3's dictionary.
    pub(crate) fn new() -> FrameWriter {
        let mut deflate = Compress::new(Compression::default(), true);
        deflate.set_dictionary(DICTIONARY).expect("a fresh compressor takes a dictionary");
        FrameWriter { deflate }
    }

    /// `frame` as bytes on the wire.
    pub(crate) fn encode(&mut self, frame: &Frame) -> Vec<u8> {
        match frame {
            Frame::Data { stream, data, fin } => {
                let mut out = Vec::with_capacity(8 + data.len());
                out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
                out.extend_from_slice(&length_word(u8::from(*fin), data.len()));
                out.extend_from_slice(data);
                out
            }
            Frame::SynReply { stream } => {
                let block = self.compress(&[]);
                let mut body = (stream & 0x7fff_ffff).to_be_bytes().to_vec();
                body.extend_from_slice(&block);
                control(SYN_REPLY, 0, &body)
            }
            Frame::SynStream { stream, headers, fin } => {
                let block = self.compress(headers);
                let mut body = (stream & 0x7fff_ffff).to_be_bytes().to_vec();
                body.extend_from_slice(&[0; 6]);
                body.extend_from_slice(&block);
                control(SYN_STREAM, u8::from(*fin), &body)
            }
            Frame::RstStream { stream, status } => {
                let mut body = (stream & 0x7fff_ffff).to_be_bytes().to_vec();
                body.extend_from_slice(&status.to_be_bytes());
                control(RST_STREAM, 0, &body)
            }
            Frame::Ping(id) => control(PING, 0, &id.to_be_bytes()),
            Frame::GoAway { last } => {
                let mut body = (last & 0x7fff_ffff).to_be_bytes().to_vec();
                body.extend_from_slice(&0u32.to_be_bytes());
                control(GOAWAY, 0, &body)
            }
            Frame::Ignored => Vec::new(),
        }
    }

    fn compress(&mut self, headers: &[(String, String)]) -> Vec<u8> {
        let mut plain = (headers.len() as u32).to_be_bytes().to_vec();
        for (name, value) in headers {
            for text in [name.to_ascii_lowercase().as_bytes(), value.as_bytes()] {
                plain.extend_from_slice(&(text.len() as u32).to_be_bytes());
                plain.extend_from_slice(text);
            }
        }
        let mut out = Vec::with_capacity(plain.len() + 64);
        let mut input = plain.as_slice();
        loop {
            out.reserve(256);
            let before = self.deflate.total_in();
            let status = self
                .deflate
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .expect("compressing into a growing buffer succeeds");
            let used = usize::try_from(self.deflate.total_in() - before).unwrap_or(input.len());
            input = &input[used..];
            // Done once every byte is in and the flush fit (it left room to spare).
            if input.is_empty() && out.len() < out.capacity() && status != Status::BufError {
                return out;
            }
        }
    }
}

fn length_word(flags: u8, length: usize) -> [u8; 4] {
    let length = u32::try_from(length).unwrap_or(0xff_ffff) & 0xff_ffff;
    (u32::from(flags) << 24 | length).to_be_bytes()
}

fn control(kind: u16, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&(0x8003_0000u32 | u32::from(kind)).to_be_bytes());
    out.extend_from_slice(&length_word(flags, body.len()));
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's SYN_STREAM as spdystream writes it, with a compressor of its own.
    fn client_syn_stream(deflate: &mut FrameWriter, stream: u32, headers: &[(&str, &str)]) -> Vec<u8> {
        let headers: Vec<(String, String)> =
            headers.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
        deflate.encode(&Frame::SynStream { stream, headers, fin: false })
    }

    #[tokio::test]
    async fn frames_read_back_as_written_across_one_compression_stream_per_direction() {
        let mut client = FrameWriter::new();
        let mut wire = Vec::new();
        wire.extend(client_syn_stream(
            &mut client,
            1,
            &[("streamtype", "error"), ("port", "8000"), ("requestid", "0")],
        ));
        wire.extend(client_syn_stream(
            &mut client,
            3,
            &[("streamtype", "data"), ("port", "8000"), ("requestid", "0")],
        ));
        wire.extend(client.encode(&Frame::Data {
            stream: 3,
            data: b"GET / HTTP/1.0\r\n\r\n".to_vec(),
            fin: true,
        }));
        wire.extend(client.encode(&Frame::Ping(7)));
        wire.extend(client.encode(&Frame::RstStream { stream: 3, status: 5 }));
        wire.extend(control(9, 0, &[0, 0, 0, 3, 0, 0, 1, 0]));
        wire.extend(client.encode(&Frame::GoAway { last: 3 }));
        let mut reader = FrameReader::new(wire.as_slice());
        let mut frames = Vec::new();
        while let Some(frame) = reader.read().await.expect("well formed") {
            frames.push(frame);
        }
        let owned = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
        };
        assert_eq!(
            frames,
            vec![
                Frame::SynStream {
                    stream: 1,
                    headers: owned(&[("streamtype", "error"), ("port", "8000"), ("requestid", "0")]),
                    fin: false
                },
                Frame::SynStream {
                    stream: 3,
                    headers: owned(&[("streamtype", "data"), ("port", "8000"), ("requestid", "0")]),
                    fin: false
                },
                Frame::Data { stream: 3, data: b"GET / HTTP/1.0\r\n\r\n".to_vec(), fin: true },
                Frame::Ping(7),
                Frame::RstStream { stream: 3, status: 5 },
                Frame::Ignored,
                Frame::GoAway { last: 3 },
            ]
        );
    }

    #[tokio::test]
    async fn a_reply_inflates_with_the_dictionary_as_a_zlib_reader_expects() {
        let mut server = FrameWriter::new();
        let first = server.encode(&Frame::SynReply { stream: 1 });
        let second = server.encode(&Frame::SynReply { stream: 3 });
        // Each block is whole by itself once the ones before it are read: a sync flush ends it.
        let mut inflate = Decompress::new(true);
        for (frame, stream) in [(first, 1u32), (second, 3)] {
            assert_eq!(&frame[..4], &(0x8003_0002u32).to_be_bytes());
            let length = u32::from_be_bytes([0, frame[5], frame[6], frame[7]]) as usize;
            assert_eq!(length, frame.len() - 8);
            assert_eq!(u32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]), stream);
            let mut plain = Vec::with_capacity(64);
            let mut input = &frame[12..];
            while !input.is_empty() {
                let before = inflate.total_in();
                match inflate.decompress_vec(input, &mut plain, FlushDecompress::Sync) {
                    Ok(_) => {}
                    Err(error) if error.needs_dictionary().is_some() => {
                        inflate.set_dictionary(DICTIONARY).expect("the dictionary");
                    }
                    Err(error) => panic!("{error}"),
                }
                input = &input[(inflate.total_in() - before) as usize..];
            }
            assert_eq!(plain, 0u32.to_be_bytes(), "an empty header block");
        }
    }

    #[tokio::test]
    async fn a_read_given_up_inside_a_frame_loses_nothing_of_it() {
        use futures_util::FutureExt;
        use tokio::io::AsyncWriteExt;

        let mut client = FrameWriter::new();
        let data =
            client.encode(&Frame::Data { stream: 3, data: b"hello, forwarded port".to_vec(), fin: false });
        let ping = client.encode(&Frame::Ping(9));
        let (mut near, far) = tokio::io::duplex(1024);
        let mut reader = FrameReader::new(far);
        // Half a header, then half a payload: each time the read is polled, then dropped, as
        // a `select!` drops the branch that loses.
        for (from, to) in [(0, 5), (5, 12)] {
            near.write_all(&data[from..to]).await.unwrap();
            assert!(reader.read().now_or_never().is_none(), "the frame is not whole yet");
        }
        near.write_all(&data[12..]).await.unwrap();
        near.write_all(&ping).await.unwrap();
        assert_eq!(
            reader.read().await.unwrap(),
            Some(Frame::Data { stream: 3, data: b"hello, forwarded port".to_vec(), fin: false })
        );
        assert_eq!(reader.read().await.unwrap(), Some(Frame::Ping(9)));
        drop(near);
        assert_eq!(reader.read().await.unwrap(), None, "a clean end between frames");
    }

    #[tokio::test]
    async fn an_oversized_or_foreign_frame_is_refused() {
        let mut big = vec![0, 0, 0, 1, 0, 0x20, 0, 0];
        big.extend(vec![0; 16]);
        assert!(FrameReader::new(big.as_slice()).read().await.is_err());
        let v2 = control(PING, 0, &[0, 0, 0, 1]);
        let mut v2 = v2.clone();
        v2[1] = 2;
        assert!(FrameReader::new(v2.as_slice()).read().await.is_err());
    }
}
