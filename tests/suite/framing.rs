//! Unit tests of the fault proxy's view of ZooKeeper's client protocol
//! (`tests/common/framing.rs`): the framer finds every request, and the sieve never sends part
//! of a message, however the stream is cut.

use crate::common;

use common::framing::{op, Framer, Message, Sieve};

fn header(xid: i32, op: i32, rest: usize) -> Vec<u8> {
    let mut message = ((8 + rest) as i32).to_be_bytes().to_vec();
    message.extend(xid.to_be_bytes());
    message.extend(op.to_be_bytes());
    message.extend(std::iter::repeat_n(0xAB, rest));
    message
}

fn request(xid: i32, op: i32) -> Message {
    Message::Request { xid, op }
}

#[test]
fn framer_finds_requests_across_any_chunking() {
    let mut connect = 40i32.to_be_bytes().to_vec();
    connect.extend([7u8; 40]); // the ConnectRequest: no request header
    let mut short = 4i32.to_be_bytes().to_vec();
    short.extend([1, 2, 3, 4]);
    let messages = [
        (connect, Message::Connect),
        (header(1, op::CREATE2, 30), request(1, op::CREATE2)),
        (short, Message::Short),
        (header(-2, op::PING, 0), request(-2, op::PING)),
        (header(2, op::SET_DATA, 5), request(2, op::SET_DATA)),
        (header(3, op::MULTI, 0), request(3, op::MULTI)),
    ];
    let (mut stream, mut want) = (Vec::new(), Vec::new());
    for (bytes, message) in messages {
        stream.extend(bytes);
        want.push((stream.len(), message));
    }
    for size in [1, 2, 3, 5, 7, 11, 13, stream.len()] {
        let mut framer = Framer::new();
        let mut found = Vec::new();
        for (index, chunk) in stream.chunks(size).enumerate() {
            let ends = framer.push(chunk).into_iter();
            found.extend(ends.map(|(end, message)| (index * size + end, message)));
        }
        assert_eq!(found, want, "chunks of {size}");
    }
    // An empty ConnectRequest, then a request in the same chunk.
    let mut stream = 0i32.to_be_bytes().to_vec();
    stream.extend(header(9, op::SYNC, 2));
    let found = Framer::new().push(&stream);
    assert_eq!(
        found,
        vec![(4, Message::Connect), (18, request(9, op::SYNC))]
    );
}

/// A sieve drops whole messages only, however the stream was cut and at whichever byte it
/// switches between passing and sieving: a message is sent whole or not at all.
#[test]
fn a_sieve_never_sends_part_of_a_message() {
    let mut connect = 6i32.to_be_bytes().to_vec();
    connect.extend([7u8; 6]);
    let parts = [
        connect,
        header(1, op::CREATE2, 30),
        header(-2, op::PING, 0),
        header(2, op::MULTI, 9),
    ];
    let stream = parts.concat();
    let without_create = [&parts[0][..], &parts[2], &parts[3]].concat();
    let (create_starts, create_ends) = (parts[0].len(), parts[0].len() + parts[1].len());
    let not_create = |m: &Message| {
        !matches!(
            m,
            Message::Request {
                op: op::CREATE2,
                ..
            }
        )
    };
    let sieved = |s: &mut Sieve, chunk: &[u8]| -> Vec<u8> {
        s.sieve(chunk, not_create)
            .into_iter()
            .flat_map(|(_, b)| b)
            .collect()
    };
    for size in [1, 2, 3, 5, 7, 11, 13, stream.len()] {
        let mut sieve = Sieve::new();
        let out: Vec<u8> = stream
            .chunks(size)
            .flat_map(|c| sieved(&mut sieve, c))
            .collect();
        assert_eq!(out, without_create, "chunks of {size}");
    }
    for k in 0..=stream.len() {
        let mut sieve = Sieve::new();
        let mut out = sieve.pass(&stream[..k]);
        out.extend(sieved(&mut sieve, &stream[k..]));
        let want = if k <= create_starts {
            &without_create
        } else {
            &stream
        };
        assert_eq!(&out, want, "passed {k} bytes, then sieved");

        let mut sieve = Sieve::new();
        let mut out = sieved(&mut sieve, &stream[..k]);
        out.extend(sieve.pass(&stream[k..]));
        let want = if k >= create_ends {
            &without_create
        } else {
            &stream
        };
        assert_eq!(&out, want, "sieved {k} bytes, then passed");
    }
}
