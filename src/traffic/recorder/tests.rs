//! Unit tests of the recorder: latency from the intended send, send lag, sender wait and
//! service time apart, the timeline.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_stalled_response_shows_up_in_the_high_percentiles() {
    // 99 requests answered in 1 ms on time; one buyer's request could not even be sent
    // until a stall of 2 s had passed. Measured from the actual send it would look like
    // 1 ms; measured from the intended send time it is 2 s.
    let opened = Instant::now();
    let rec = Recorder::new(opened);
    for i in 0..99u64 {
        let intended = opened + Duration::from_millis(i * 10);
        rec.record(
            Kind::Order,
            Answer::Created,
            intended,
            intended,
            intended + Duration::from_millis(1),
        );
    }
    let intended = opened + Duration::from_millis(5);
    let actually_sent = intended + Duration::from_secs(2);
    rec.record(
        Kind::Order,
        Answer::Created,
        intended,
        actually_sent,
        actually_sent + Duration::from_millis(1),
    );
    let h = rec.finish().by_kind(Kind::Order);
    assert_eq!(h.len(), 100);
    assert!(h.value_at_quantile(0.5) <= 1_001, "p50 stays at 1 ms");
    assert!(
        h.value_at_quantile(0.999) >= 2_000_000,
        "p99.9 shows the 2 s stall"
    );
    assert!(h.max() >= 2_000_000);
}

#[tokio::test(start_paused = true)]
async fn a_request_sent_late_shows_its_send_lag_apart_and_counts_in_flight() {
    let opened = Instant::now();
    let rec = Recorder::new(opened);
    let intended = opened;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let sent = rec.sending(Kind::Order, intended, None);
    assert_eq!(rec.progress().in_flight, 1);
    tokio::time::sleep(Duration::from_millis(5)).await;
    rec.record(Kind::Order, Answer::Created, intended, sent, Instant::now());
    assert_eq!(rec.progress().in_flight, 0);
    let m = rec.finish();
    let lag = m.send_lag_all();
    assert_eq!(lag.len(), 1);
    assert!((29_000..=31_000).contains(&lag.max()), "{}", lag.max());
    assert!(
        m.by_kind(Kind::Order).max() >= 35_000,
        "latency includes the lag"
    );
    assert_eq!(m.order_answer_span, Some(Duration::ZERO));
    let service = m.service_all();
    assert_eq!(service.len(), 1);
    assert!(
        (4_900..=5_100).contains(&service.max()),
        "service time is the 5 ms after the actual send, not the lag: {}",
        service.max()
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_for_a_held_sender_is_sender_wait_and_only_the_lateness_before_is_send_lag() {
    let opened = Instant::now();
    let rec = Recorder::new(opened);
    let intended = opened;
    tokio::time::sleep(Duration::from_millis(2)).await;
    let queued = Instant::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let sent = rec.sending(Kind::Order, intended, Some(queued));
    rec.record(Kind::Order, Answer::Created, intended, sent, Instant::now());
    let m = rec.finish();
    let (lag, wait) = (m.send_lag_all(), m.sender_wait_all());
    assert!((1_900..=2_100).contains(&lag.max()), "{}", lag.max());
    assert!((49_000..=51_000).contains(&wait.max()), "{}", wait.max());
    assert!(m.by_kind(Kind::Order).max() >= 52_000, "latency holds both");
}

#[tokio::test(start_paused = true)]
async fn the_timeline_counts_answers_per_second_and_the_first_sold_out() {
    let opened = Instant::now();
    let rec = Recorder::new(opened);
    rec.record(
        Kind::Order,
        Answer::Created,
        opened,
        opened,
        opened + Duration::from_millis(200),
    );
    rec.record(
        Kind::Order,
        Answer::SoldOut,
        opened,
        opened,
        opened + Duration::from_millis(1500),
    );
    rec.record(
        Kind::Order,
        Answer::SoldOut,
        opened,
        opened,
        opened + Duration::from_millis(1700),
    );
    let m = rec.finish();
    assert_eq!(m.timeline.len(), 2);
    assert_eq!(m.timeline[1][&(Kind::Order, Answer::SoldOut)], 2);
    assert_eq!(m.first_sold_out_ms, Some(1500));
    assert_eq!(m.counts(Kind::Order)[&Answer::SoldOut], 2);
}

#[tokio::test(start_paused = true)]
async fn the_records_are_spelled_out_in_the_order_recorded_with_every_field_as_told() {
    // Arrange: attempts keyed by number, by another buyer's number and by text, with and
    // without an order id; an acknowledgement for every third, one with ids not the seeded
    // ones, one followed by a cancel. Enough of them that the records shrink while spelled.
    let opened = Instant::now();
    let rec = Recorder::new(opened);
    let (mut attempts, mut acks) = (Vec::new(), Vec::new());
    for i in 0..1_000usize {
        let done = opened + Duration::from_millis(i as u64);
        let text = format!("custom-{i}");
        let (key, spelled) = match i % 3 {
            0 => (Key::Attempt { buyer: i, n: 0 }, rec.attempt_key(i, 0)),
            1 => (
                Key::Attempt { buyer: i + 1, n: 2 },
                rec.attempt_key(i + 1, 2),
            ),
            _ => (Key::Text(&text), text.clone()),
        };
        let order_id = (i % 2 == 0).then(|| format!("order-{i}"));
        let answer = if order_id.is_some() {
            Answer::Created
        } else {
            Answer::SoldOut
        };
        let id = rec.attempt(key, i, answer, order_id.as_deref(), done);
        attempts.push(Attempt {
            key: spelled.clone().into(),
            buyer: i,
            answer,
            class: AnswerClass::of(answer),
            order_id: order_id.as_deref().map(Into::into),
            at_ms: i as u64,
            retry: false,
        });
        if i % 3 == 0 {
            let (user, device) = if i == 300 {
                (Ident::given("someone"), Ident::given("phone"))
            } else {
                (Ident::user(i, false), Ident::device(i, false))
            };
            let ack = rec.ack(id, &user, &device, false, opened);
            let cancelled = i == 600;
            if cancelled {
                rec.followed_up(ack, Told::Cancelled, done, done);
            }
            acks.push((
                spelled,
                order_id,
                i,
                user.to_string(),
                device.to_string(),
                cancelled,
            ));
        }
    }

    // Act
    let m = rec.finish();

    // Assert
    assert_eq!(m.spelled().0, attempts);
    assert_eq!(m.acks().len(), acks.len());
    for (got, (key, order_id, buyer, user, device, cancelled)) in m.acks().zip(&acks) {
        assert_eq!(got.key, Some(KeyRef::Text(key)));
        assert_eq!(got.order_id, order_id.as_deref());
        assert_eq!(
            (got.buyer, got.at_ms, got.sent_ms),
            (*buyer, *buyer as u64, 0)
        );
        assert_eq!(
            (&got.user_id.to_string(), &got.device_id.to_string()),
            (user, device)
        );
        assert_eq!(got.cancel_sent_ms.is_some(), *cancelled);
        assert_eq!(got.paid_ms, None);
    }
}
