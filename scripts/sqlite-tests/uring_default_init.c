/*
** Compiled into SQLite's testfixture by scripts/sqlite-tests/run, with
**   -DSQLITE_EXTRA_INIT=sqlite_uring_extra_init
** It runs at the end of every successful sqlite3_initialize() (so also after a
** sqlite3_shutdown()/sqlite3_initialize() pair, which would otherwise make "unix" the
** default again). If SQLITE_URING_EXT names libsqlite_uring.so, it loads it through
** SQLite's ordinary extension loader with the entry point that makes "io_uring" the
** default VFS, then aborts the process unless sqlite3_vfs_find(0) is "io_uring".
** With SQLITE_URING_EXT unset the testfixture is stock (default VFS "unix").
*/
#include "sqlite3.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sqlite_uring_extra_init(const char *zUnused){
  const char *zPath = getenv("SQLITE_URING_EXT");
  sqlite3 *db = 0;
  char *zErr = 0;
  int rc;
  sqlite3_vfs *pDflt;
  static int nCall = 0;
  (void)zUnused;
  if( zPath==0 || zPath[0]==0 ) return SQLITE_OK;
  rc = sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE|SQLITE_OPEN_CREATE, 0);
  if( rc==SQLITE_OK ) rc = sqlite3_enable_load_extension(db, 1);
  if( rc==SQLITE_OK ){
    rc = sqlite3_load_extension(db, zPath, "sqlite3_sqliteuring_default_init", &zErr);
  }
  if( rc!=SQLITE_OK ){
    fprintf(stderr, "uring-shim: loading %s failed: rc=%d %s\n", zPath, rc,
            zErr ? zErr : (db ? sqlite3_errmsg(db) : "(no db)"));
    abort();
  }
  sqlite3_free(zErr);
  sqlite3_close(db);
  pDflt = sqlite3_vfs_find(0);
  if( pDflt==0 || strcmp(pDflt->zName, "io_uring")!=0 ){
    fprintf(stderr, "uring-shim: default VFS is %s, not io_uring\n",
            pDflt ? pDflt->zName : "(none)");
    abort();
  }
  nCall++;
  if( getenv("SQLITE_URING_SHIM_VERBOSE") || nCall==1 ){
    fprintf(stderr, "uring-shim: sqlite3_initialize #%d: default VFS is %s\n",
            nCall, pDflt->zName);
  }
  return SQLITE_OK;
}
