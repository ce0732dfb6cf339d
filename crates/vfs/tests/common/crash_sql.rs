//! Transaction number `seq` of the crash writers, shared by the io_uring child
//! (`examples/torture.rs`) and the stock-sqlite3 writer of `tests/crash.rs`: the test checks
//! what the child wrote, so both must generate exactly the same transactions. Every eighth
//! transaction adds 120 rows of ~1 KiB to `bulk` (seq ≡ 3) or deletes them all (seq ≡ 7),
//! which with auto_vacuum=FULL shrinks the file (xTruncate) in the same transaction.

pub fn crash_transaction_sql(seq: i64) -> String {
    let bulk = match seq % 8 {
        3 => {
            "INSERT INTO bulk(pad) SELECT randomblob(900) FROM \
             (WITH RECURSIVE k(i) AS (VALUES (1) UNION ALL SELECT i + 1 FROM k WHERE i < 120) \
             SELECT i FROM k);\n"
        }
        7 => "DELETE FROM bulk;\n",
        _ => "",
    };
    format!(
        "BEGIN IMMEDIATE;\n\
         INSERT INTO seqs(seq, pad) VALUES ({seq}, randomblob({}));\n\
         {bulk}\
         UPDATE meta SET writes = writes + 1, last = {seq};\n\
         COMMIT;\n",
        100 + (seq * 7919) % 5000
    )
}
