//! Micro-benchmark of the per-request backend choice (`Pool::pick` plus the
//! lease, through `Pool::pick_addr`) for 1, 2, 4, 8 and 64 backends, for each balance and for sticky
//! sequences: the cost per request must not grow with the number of
//! backends. Run: `cargo bench --bench pick`.

use std::time::Instant;

use tensorgate::config::{Balance, Upstream};
use tensorgate::upstream::{Pool, Target, UpstreamSettings};

const PICKS: u32 = 1_000_000;

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "| backends | round_robin ns/pick | least_outstanding | power_of_two | sequence (Ketama) |"
    );
    println!("|---|---|---|---|---|");
    for n in [1u16, 2, 4, 8, 64] {
        let mut row = format!("| {n} |");
        for balance in [
            Balance::RoundRobin,
            Balance::LeastOutstanding,
            Balance::PowerOfTwo,
        ] {
            let pool = runtime.block_on(pool(n, balance));
            row += &format!(" {:.0} |", ns_per_pick(&pool, false));
        }
        let pool = runtime.block_on(pool(n, Balance::RoundRobin));
        row += &format!(" {:.0} |", ns_per_pick(&pool, true));
        println!("{row}");
    }
}

/// A pool of `n` backends (addresses nobody listens on), all open.
async fn pool(n: u16, balance: Balance) -> std::sync::Arc<Pool> {
    let config = Upstream {
        addresses: (0..n).map(|i| format!("127.0.0.1:{}", 20000 + i)).collect(),
        balance,
        ..Upstream::default()
    };
    let pool = Pool::new(UpstreamSettings::from_config(&config), Default::default());
    pool.discover().await.expect("static discovery");
    for backend in pool.backends() {
        backend.mark_seen_ready();
    }
    pool
}

fn ns_per_pick(pool: &Pool, sticky: bool) -> f64 {
    let start = Instant::now();
    let mut key = itoa::Buffer::new();
    for i in 0..PICKS {
        let target = Target {
            model: Some("add_sub"),
            sequence: sticky.then(|| key.format(i % 1000).as_bytes()),
        };
        let addr = pool.pick_addr(&target).expect("a backend");
        std::hint::black_box(addr);
    }
    start.elapsed().as_nanos() as f64 / f64::from(PICKS)
}
