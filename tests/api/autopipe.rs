//! The shop's automatic pipelining on a real Redis: commands in flight together share one
//! write and each still gets its own answer; a server error answers only its own command; a
//! dropped connection answers every command waiting, none hangs. (A sale through the shop's
//! pre-deduct, which goes through it, is `redis_lua`'s.)

use crate::helpers::*;
use oversell::testing::store::redis_conn::RedisConn;
use oversell::testing::store::AutoPipe;
use std::time::Duration;

fn incr(key: &str) -> redis::Cmd {
    let mut c = redis::cmd("INCR");
    c.arg(key);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_in_flight_together_share_a_write_and_each_gets_its_own_answer() {
    let prefix = fresh_prefix();
    let key = format!("{{{prefix}:n}}");
    let pipe = AutoPipe::start(RedisConn::open(&redis_url()).await.unwrap());
    let tasks: Vec<_> = (0..500)
        .map(|_| {
            let (pipe, key) = (pipe.clone(), key.clone());
            tokio::spawn(async move { pipe.query(incr(&key)).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        let v: i64 = redis::from_redis_value(t.await.unwrap().unwrap()).unwrap();
        answers.push(v);
    }
    answers.sort();
    // Every INCR ran once, in some order: 1..=500, each answer its own.
    assert_eq!(answers, (1..=500).collect::<Vec<i64>>());
    let (pipelines, commands) = pipe.sent();
    assert_eq!(commands, 500);
    // 500 commands queued at once cannot each have had a write of their own.
    assert!(pipelines < 500, "{pipelines} pipelines for 500 commands");
    delete_prefix(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_answers_only_its_own_command() {
    let prefix = fresh_prefix();
    let key = format!("{{{prefix}:n}}");
    let pipe = AutoPipe::start(RedisConn::open(&redis_url()).await.unwrap());
    let mut bad = redis::cmd("EVALSHA");
    bad.arg("0000000000000000000000000000000000000000").arg(0);
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let (pipe, key, bad) = (pipe.clone(), key.clone(), bad.clone());
            tokio::spawn(async move {
                let cmd = if i % 10 == 0 { bad } else { incr(&key) };
                (i, pipe.query(cmd).await)
            })
        })
        .collect();
    let mut good = 0;
    for t in tasks {
        let (i, r) = t.await.unwrap();
        if i % 10 == 0 {
            let e = r.expect_err("an unknown script");
            assert_eq!(
                e.kind(),
                redis::ErrorKind::Server(redis::ServerErrorKind::NoScript),
                "{e}"
            );
        } else {
            r.expect("an INCR beside it");
            good += 1;
        }
    }
    assert_eq!(good, 180);
    let mut c = redis_conn().await;
    let n: i64 = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(n, 180);
    delete_prefix(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_answers_every_waiting_command_and_none_hangs() {
    let name = format!("{}-pipe", fresh_prefix()).replace(':', "-");
    let mut conn = RedisConn::open(&redis_url()).await.unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(&name)
        .query_async(&mut conn)
        .await
        .unwrap();
    let pipe = AutoPipe::start(conn);
    // A command that holds the connection for 300 ms, so the others queue behind it.
    let mut slow = redis::cmd("BLPOP");
    slow.arg(format!("{}:never", fresh_prefix())).arg(0.3);
    let first = {
        let pipe = pipe.clone();
        tokio::spawn(async move { pipe.query(slow).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waiting: Vec<_> = (0..50)
        .map(|_| {
            let pipe = pipe.clone();
            tokio::spawn(async move { pipe.query(redis::cmd("PING")).await })
        })
        .collect();
    // Kill the pipe's connection from another one while the BLPOP holds it.
    let mut admin = redis_conn().await;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .unwrap();
    let id = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("id=")))
        .expect("the pipe's connection in CLIENT LIST")
        .to_string();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&id)
        .query_async(&mut admin)
        .await
        .unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), async {
        let first = first.await.unwrap();
        let mut errors = usize::from(first.is_err());
        for w in waiting {
            errors += usize::from(w.await.unwrap().is_err());
        }
        errors
    })
    .await
    .expect("every command answered within 10 s");
    // The BLPOP's connection died under it; the PINGs behind it went out on the dead
    // connection: each has its answer (an error), none waits forever.
    assert!(answered >= 1, "the killed connection's command failed");
}
