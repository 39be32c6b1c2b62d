//! Review finding (issue 23's review, F1): a stalled writer's late create
//! re-made a deleted generation beside the chain, and another writer's hint,
//! written late too, pointed every reader at it: the chain and its holder
//! vanished, and a newcomer was granted beside the holder. A generation
//! that landed late is trusted only after a listing finds nothing newer.

use super::common::fault_proxy::generation_create;
use super::common::ssm::{advance, generations, held_proxy, hint_put, serial, ssm_store_via};
use super::common::stores::{granted, lease, lock, owner, store};
use sfn_lock::{AcquireOutcome, EpochMillis, LockStore};

#[tokio::test]
async fn ssm_a_late_hint_on_a_late_fork_hides_no_holder() {
    let _serial = serial().await;
    let direct = store("ssm").await;
    let name = lock("late-hint-fork");
    let now = EpochMillis::now();
    granted(
        direct
            .acquire(&name, &owner("arn:a"), lease(60), now)
            .await
            .unwrap(),
    );
    direct.release(&name, &owner("arn:a"), now).await.unwrap();
    // W read generation 2 and stalls before its create of 3; X creates 3
    // and stalls before its hint.
    let (w_url, w_held) = held_proxy(generation_create).await;
    let (x_url, x_held) = held_proxy(hint_put).await;
    let (w_store, x_store) = (ssm_store_via(&w_url).await, ssm_store_via(&x_url).await);
    let w = {
        let name = name.clone();
        tokio::spawn(async move {
            w_store
                .acquire(&name, &owner("arn:w"), lease(60), now)
                .await
        })
    };
    w_held.arrived().await;
    let x = {
        let name = name.clone();
        tokio::spawn(async move {
            x_store
                .acquire(&name, &owner("arn:x"), lease(60), now)
                .await
        })
    };
    x_held.arrived().await;
    // The chain moves on for an hour of SSM's time: X's grant is freed, B
    // holds, renewing; generation 3 and its neighbours are deleted.
    direct.release(&name, &owner("arn:x"), now).await.unwrap();
    granted(
        direct
            .acquire(&name, &owner("arn:b"), lease(7200), now)
            .await
            .unwrap(),
    );
    for _ in 0..14 {
        advance(360);
        let renewed = direct
            .acquire(&name, &owner("arn:b"), lease(7200), now)
            .await
            .unwrap();
        assert!(matches!(renewed, AcquireOutcome::Renewed(_)), "{renewed:?}");
    }
    let kept = generations(&name).await;
    assert!(
        kept.iter().all(|g| g.as_str() > "00000000000000000013"),
        "{kept:?}"
    );
    // The stalled requests land: W's create re-makes 3, X's hint names 3.
    w_held.go();
    w_held.landed().await;
    x_held.go();
    x_held.landed().await;
    assert!(
        generations(&name)
            .await
            .iter()
            .any(|g| g.ends_with("00003")),
        "the fork landed"
    );
    let late = w.await.unwrap();
    assert!(
        matches!(&late, Ok(AcquireOutcome::Held(c)) if c.holders[0].owner == "arn:b"),
        "W's late create is not answered for; deciding again it finds B: {late:?}"
    );
    assert!(x.await.unwrap().is_ok());
    let c = direct
        .acquire(&name, &owner("arn:c"), lease(60), now)
        .await
        .unwrap();
    assert!(
        matches!(&c, AcquireOutcome::Held(h) if h.holders[0].owner == "arn:b"),
        "B still holds: {c:?}"
    );
}
