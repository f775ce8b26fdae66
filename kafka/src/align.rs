//! Time-aligned consumption: the order in which the kafka receiver hands received messages
//! to the pipeline.
//!
//! librdkafka delivers the partitions of a consumer's assignment interleaved as the brokers
//! answer its fetches, and a broker answers a fetch with a run of one partition's messages
//! (Tansu: up to 64). Reading a backlog, one partition therefore runs minutes ahead of
//! another, and the exporter's time-aligned chunk windows see a session's minute arrive
//! partly after its window closed: an unkeyed (round-robin) backlog, where every partition
//! holds every session, then makes several chunks per session and window.
//!
//! With `alignment.enabled` the receiver keeps what it received in one lane per topic
//! partition and hands over the lane head with the oldest message timestamp (the producer's
//! `CreateTime`, or the broker's `LogAppendTime`; a message without one goes first), but only
//! once every other assigned partition of the same topic either has a message waiting, is
//! caught up (the broker said it reached the partition's end, `enable.partition.eof`), or has
//! been empty for `max_wait`. A lane holding more than its share of `max_buffered_bytes` is
//! held (its partition paused) until it is below half of it, so a partition that runs ahead
//! waits for the others at the broker, not in memory.
//!
//! Each partition's messages keep their order (and so their offsets' order), nothing is
//! dropped, and a live stream (every partition caught up) is handed over as it arrives.
//! Disabled, messages go to the pipeline in the order they were received.

use rdkafka::message::{Message, OwnedMessage};
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// `alignment:` of the kafka receiver. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Alignment {
    /// Hand messages over in timestamp order across a topic's partitions (default true).
    pub enabled: bool,
    /// How long an assigned partition that is neither caught up nor has a message waiting
    /// holds back the others (default 1 s).
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// Payload bytes the lanes may hold together before the partitions that run ahead are
    /// paused (default 33554432, 32 MiB).
    pub max_buffered_bytes: u64,
}

impl Default for Alignment {
    fn default() -> Self {
        Alignment {
            enabled: true,
            max_wait: Duration::from_secs(1),
            max_buffered_bytes: 32 << 20,
        }
    }
}

/// A topic partition.
pub(crate) type Partition = (String, i32);

/// One partition's received messages, with the order they were received in.
#[derive(Default)]
struct Lane {
    queue: VecDeque<(u64, OwnedMessage)>,
    bytes: u64,
    /// The broker reported the partition's end and nothing arrived since.
    caught_up: bool,
    /// Since when the lane has been empty (`None` while it holds messages).
    empty_since: Option<Instant>,
    /// Its partition is paused because the lane holds more than its share.
    held: bool,
}

impl Lane {
    /// The alignment key of the head: (timestamp, arrival).
    fn head(&self) -> Option<(i64, u64)> {
        self.queue
            .front()
            .map(|(seq, m)| (m.timestamp().to_millis().unwrap_or(i64::MIN), *seq))
    }
}

/// What [`Aligner::pop`] found.
pub(crate) enum Next {
    /// The message to hand over, with its arrival number (for [`Aligner::put_back`]).
    Ready(u64, OwnedMessage),
    /// Messages are waiting, but none may go before this instant (unless more arrive).
    Blocked(Instant),
    /// Nothing is waiting.
    Empty,
}

/// The lanes. See the module docs.
pub(crate) struct Aligner {
    cfg: Alignment,
    lanes: BTreeMap<Partition, Lane>,
    seq: u64,
    len: usize,
}

fn payload_len(m: &OwnedMessage) -> u64 {
    m.payload().map_or(0, <[u8]>::len) as u64
}

impl Aligner {
    pub(crate) fn new(cfg: Alignment) -> Self {
        Aligner {
            cfg,
            lanes: BTreeMap::new(),
            seq: 0,
            len: 0,
        }
    }

    /// Messages waiting.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether no message waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A partition was assigned: until it sends something or is caught up, it holds the
    /// others back (at most `max_wait`).
    pub(crate) fn assigned(&mut self, p: Partition, now: Instant) {
        self.lanes.entry(p).or_insert_with(|| Lane {
            empty_since: Some(now),
            ..Lane::default()
        });
    }

    /// A received message.
    pub(crate) fn push(&mut self, m: OwnedMessage) {
        let lane = self
            .lanes
            .entry((m.topic().to_string(), m.partition()))
            .or_default();
        lane.caught_up = false;
        lane.empty_since = None;
        lane.bytes += payload_len(&m);
        lane.queue.push_back((self.seq, m));
        self.seq += 1;
        self.len += 1;
    }

    /// The broker reached the end of `partition` (librdkafka names no topic: every topic's
    /// partition of that number counts as caught up, which at worst aligns less).
    pub(crate) fn caught_up(&mut self, partition: i32) {
        for ((_, p), lane) in self.lanes.iter_mut() {
            if *p == partition {
                lane.caught_up = true;
            }
        }
    }

    /// Forgets a revoked partition; its waiting messages, released uncommitted.
    pub(crate) fn revoke(&mut self, p: &Partition) -> usize {
        let n = self.lanes.remove(p).map_or(0, |l| l.queue.len());
        self.len -= n;
        n
    }

    /// The next message to hand over at `now`.
    pub(crate) fn pop(&mut self, now: Instant) -> Next {
        if self.len == 0 {
            return Next::Empty;
        }
        let key = if self.cfg.enabled {
            match self.aligned(now) {
                Ok(k) => k,
                Err(until) => return Next::Blocked(until),
            }
        } else {
            let oldest = self
                .lanes
                .iter()
                .filter_map(|(k, l)| l.queue.front().map(|(seq, _)| (*seq, k)))
                .min();
            oldest.map(|(_, k)| k.clone()).expect("len > 0")
        };
        let lane = self.lanes.get_mut(&key).expect("chosen lane");
        let (seq, m) = lane.queue.pop_front().expect("chosen lane has a head");
        lane.bytes -= payload_len(&m);
        if lane.queue.is_empty() {
            lane.empty_since = Some(now);
        }
        self.len -= 1;
        Next::Ready(seq, m)
    }

    /// The lane whose head may go first, or the instant the first waiting partition stops
    /// holding the others back.
    fn aligned(&self, now: Instant) -> Result<Partition, Instant> {
        /// One topic's lanes seen so far: its oldest head, and the first instant a waiting
        /// lane stops holding it back.
        #[derive(Default)]
        struct Topic<'a> {
            head: Best<'a>,
            blocker: Option<Instant>,
        }
        type Best<'a> = Option<((i64, u64), &'a Partition)>;
        fn finish<'a>(t: Topic<'a>, best: &mut Best<'a>, until: &mut Option<Instant>) {
            let Some((head, k)) = t.head else { return };
            // A message without a timestamp has nothing to align with.
            match t.blocker.filter(|_| head.0 != i64::MIN) {
                Some(b) => *until = Some(until.map_or(b, |u| u.min(b))),
                None if best.is_none_or(|(h, _)| head < h) => *best = Some((head, k)),
                None => {}
            }
        }
        let mut best: Best<'_> = None;
        let mut until: Option<Instant> = None;
        // Lanes are ordered by topic, so each topic's lanes come together.
        let mut topic = Topic::default();
        let mut name: Option<&str> = None;
        for (k, l) in &self.lanes {
            if name != Some(k.0.as_str()) {
                finish(std::mem::take(&mut topic), &mut best, &mut until);
                name = Some(k.0.as_str());
            }
            if let Some(h) = l.head() {
                if topic.head.is_none_or(|(b, _)| h < b) {
                    topic.head = Some((h, k));
                }
            } else if !l.caught_up {
                let free_at = l.empty_since.unwrap_or(now) + self.cfg.max_wait;
                if free_at > now {
                    topic.blocker = Some(topic.blocker.map_or(free_at, |b| b.min(free_at)));
                }
            }
        }
        finish(topic, &mut best, &mut until);
        match (best, until) {
            (Some((_, k)), _) => Ok(k.clone()),
            (None, Some(t)) => Err(t),
            (None, None) => unreachable!("messages wait, so some topic has a head"),
        }
    }

    /// Puts a message [`pop`](Self::pop) returned back at the head of its lane.
    pub(crate) fn put_back(&mut self, seq: u64, m: OwnedMessage) {
        let lane = self
            .lanes
            .entry((m.topic().to_string(), m.partition()))
            .or_default();
        lane.empty_since = None;
        lane.bytes += payload_len(&m);
        lane.queue.push_front((seq, m));
        self.len += 1;
    }

    /// A lane's share of `max_buffered_bytes`.
    fn share(&self) -> u64 {
        self.cfg.max_buffered_bytes / self.lanes.len().max(1) as u64
    }

    /// Partitions to pause now (their lanes hold more than their share) and to resume now
    /// (held lanes back under half of it).
    pub(crate) fn holds(&mut self) -> (Vec<Partition>, Vec<Partition>) {
        let (mut hold, mut release) = (Vec::new(), Vec::new());
        if !self.cfg.enabled {
            return (hold, release);
        }
        let share = self.share();
        for (k, lane) in self.lanes.iter_mut() {
            if !lane.held && lane.bytes > share {
                lane.held = true;
                hold.push(k.clone());
            } else if lane.held && lane.bytes <= share / 2 {
                lane.held = false;
                release.push(k.clone());
            }
        }
        (hold, release)
    }

    /// The partitions held now.
    pub(crate) fn held(&self) -> impl Iterator<Item = &Partition> {
        self.lanes.iter().filter(|(_, l)| l.held).map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::message::Timestamp;

    fn msg(topic: &str, partition: i32, ts: Option<i64>, len: usize) -> OwnedMessage {
        OwnedMessage::new(
            Some(vec![0; len]),
            None,
            topic.into(),
            ts.map_or(Timestamp::NotAvailable, Timestamp::CreateTime),
            partition,
            0,
            None,
        )
    }

    fn ready(a: &mut Aligner, now: Instant) -> Option<(i32, i64)> {
        match a.pop(now) {
            Next::Ready(_, m) => Some((m.partition(), m.timestamp().to_millis().unwrap_or(-1))),
            _ => None,
        }
    }

    fn aligner(enabled: bool) -> Aligner {
        Aligner::new(Alignment {
            enabled,
            max_wait: Duration::from_secs(1),
            max_buffered_bytes: 1000,
        })
    }

    #[test]
    fn oldest_head_goes_first_across_partitions() {
        let mut a = aligner(true);
        let now = Instant::now();
        for (p, ts) in [(0, 10), (0, 20), (0, 30), (1, 15), (1, 25)] {
            a.push(msg("t", p, Some(ts), 1));
        }
        a.caught_up(0);
        a.caught_up(1);
        let order: Vec<_> = std::iter::from_fn(|| ready(&mut a, now)).collect();
        assert_eq!(order, [(0, 10), (1, 15), (0, 20), (1, 25), (0, 30)]);
    }

    #[test]
    fn an_empty_partition_holds_the_others_until_caught_up_or_max_wait() {
        let mut a = aligner(true);
        let now = Instant::now();
        a.assigned(("t".into(), 1), now);
        a.push(msg("t", 0, Some(10), 1));
        match a.pop(now) {
            Next::Blocked(t) => assert_eq!(t, now + Duration::from_secs(1)),
            _ => panic!("partition 1 has sent nothing yet: partition 0 must wait"),
        }
        assert_eq!(ready(&mut a, now + Duration::from_secs(1)), Some((0, 10)));
        // Empty again after a message: it waits for the partition's next fetch...
        a.push(msg("t", 1, Some(11), 1));
        a.push(msg("t", 0, Some(12), 1));
        let later = now + Duration::from_secs(5);
        assert_eq!(ready(&mut a, later), Some((1, 11)));
        assert!(matches!(a.pop(later), Next::Blocked(_)));
        // ...unless the broker says it is at the end.
        a.caught_up(1);
        assert_eq!(ready(&mut a, later), Some((0, 12)));
        assert!(matches!(a.pop(later), Next::Empty));
    }

    #[test]
    fn topics_align_apart_and_untimed_messages_never_wait() {
        let mut a = aligner(true);
        let now = Instant::now();
        a.assigned(("a".into(), 1), now);
        a.push(msg("a", 0, Some(5), 1));
        a.push(msg("b", 0, Some(50), 1));
        a.push(msg("a", 0, None, 1));
        // Topic b has no one to wait for; topic a's head waits for its partition 1.
        assert_eq!(ready(&mut a, now), Some((0, 50)));
        assert!(matches!(a.pop(now), Next::Blocked(_)));
        let mut b = aligner(true);
        b.assigned(("a".into(), 1), now);
        b.push(msg("a", 0, None, 1));
        assert_eq!(ready(&mut b, now), Some((0, -1)));
    }

    #[test]
    fn disabled_keeps_arrival_order_and_put_back_restores_the_head() {
        let mut a = aligner(false);
        let now = Instant::now();
        a.assigned(("t".into(), 2), now);
        for (p, ts) in [(0, 30), (1, 10), (0, 20)] {
            a.push(msg("t", p, Some(ts), 1));
        }
        let Next::Ready(seq, m) = a.pop(now) else {
            panic!("ready")
        };
        a.put_back(seq, m);
        let order: Vec<_> = std::iter::from_fn(|| ready(&mut a, now)).collect();
        assert_eq!(order, [(0, 30), (1, 10), (0, 20)]);
        assert_eq!(a.len(), 0);
    }

    #[test]
    fn a_lane_over_its_share_is_held_until_under_half() {
        let mut a = aligner(true);
        let now = Instant::now();
        a.caught_up(1);
        for ts in 0..6 {
            a.push(msg("t", 0, Some(ts), 100));
        }
        a.push(msg("t", 1, Some(100), 100));
        // Two lanes: a share of 500 bytes each.
        let (hold, release) = a.holds();
        assert_eq!((hold, release.len()), (vec![("t".to_string(), 0)], 0));
        assert_eq!(a.held().count(), 1);
        for _ in 0..3 {
            ready(&mut a, now);
        }
        assert_eq!(a.holds(), (vec![], vec![]), "300 bytes: not yet under half");
        ready(&mut a, now);
        assert_eq!(a.holds(), (vec![], vec![("t".to_string(), 0)]));
        assert_eq!(a.revoke(&("t".into(), 0)), 2);
        assert_eq!(a.len(), 1);
    }
}
