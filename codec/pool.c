/* pool.c — tiles across threads: l3_parallel_tiles() on a persistent pool of
 * worker threads.
 *
 * The tiles of one call are handed out one at a time from an atomic counter;
 * the calling thread is worker 0 and works too. Threads started and joined
 * on every call cost the caller 50-110 us in pthread_create, and the new
 * thread ran its first tile 80-180 us after the call began (2-vCPU KVM guest,
 * mostly idle), against a 5-6 ms two-thread decode of a 2048x1365 photo; so
 * the workers are started once, by the first call that wants them, and sleep
 * between calls (after a spin of 200 us: a decode loop's next image finds
 * them awake). bench/thread_overhead measures the difference. The spin is
 * longer than the wait of a worker that finished its last batch while the
 * caller still decodes its own: with 50 us, 57 of 105 back-to-back two-thread
 * decodes of 2048x1024 photos found their worker asleep (a worker woken from
 * sleep starts 145 us after the call on average, Zen 5 KVM guest); with
 * 200 us, only the first call after each 1-thread pause did (20 of 105).
 *
 * Concurrency: one call at a time owns the pool (pool.busy); a call that finds
 * it owned, or cannot start the workers it needs, starts threads of its own
 * for that call as before. Fork: the child of a fork has none of the
 * parent's workers, so a pthread_atfork() child handler empties the pool
 * (the child starts its own on its first call). The workers block every
 * signal, and are stopped and joined when the library is unloaded or the
 * process exits. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "l3_internal.h"

#define POOL_MAX (L3_MAX_THREADS - 1) /* workers besides the caller */
#define IDLE_SPIN_NS 200000 /* a worker spins this long for the next call */
#define DONE_SPIN_NS 50000 /* the caller spins this long for the workers' last tiles */

/* One call: shared by its threads, on the caller's stack. */
struct par {
    uint64_t tiles;
    atomic_uint_fast64_t next; /* next tile to hand out */
    atomic_int status;         /* first failure, 0 while none */
    l3_tile_fn fn;
    void *arg;
    unsigned threads;          /* the caller and threads - 1 workers */
    unsigned claimed;          /* pool: worker ids given out (pool.lock) */
    atomic_uint done;          /* pool: workers finished (written under pool.lock) */
};

static void run_worker(struct par *p, unsigned id)
{
    for (;;) {
        if (atomic_load_explicit(&p->status, memory_order_relaxed))
            return;
        uint64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= p->tiles)
            return;
        int st = p->fn(p->arg, id, t);
        if (st) {
            int zero = 0;
            atomic_compare_exchange_strong(&p->status, &zero, st);
            return;
        }
    }
}

/* ---- threads of one call (when the pool is not available) ---- */

struct own {
    struct par *par;
    unsigned id;
};

static void *own_main(void *v)
{
    struct own *w = v;
    run_worker(w->par, w->id);
    return NULL;
}

static void run_own_threads(struct par *p)
{
    pthread_t tid[L3_MAX_THREADS];
    struct own w[L3_MAX_THREADS];
    unsigned started = 0;
    for (unsigned i = 1; i < p->threads; i++) {
        w[i].par = p;
        w[i].id = i;
        if (pthread_create(&tid[i], NULL, own_main, &w[i]) != 0)
            break; /* fewer threads than asked is not an error: the work is done */
        started = i;
    }
    run_worker(p, 0);
    for (unsigned i = 1; i <= started; i++)
        pthread_join(tid[i], NULL);
}

/* ---- the pool ---- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;  /* a new call, or stop (lock) */
    pthread_cond_t idle;  /* a call's last worker finished (lock) */
    atomic_int busy;      /* a call owns the pool: set by compare-exchange */
    unsigned workers;     /* started (lock; written only by the owner) */
    pthread_t tid[POOL_MAX];
    atomic_uint_fast64_t gen; /* calls handed to the pool (written under lock) */
    uint64_t born;        /* gen when the last workers were started (lock) */
    struct par *job;      /* the current call, NULL between calls (lock) */
    unsigned sleeping;    /* workers waiting on `wake` (lock) */
    int caller_waits;     /* the owner waits on `idle` (lock) */
    int stop;             /* workers exit (lock) */
} pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A bounded spin: call spin_on() after each failed look; it pauses the CPU
 * and returns 0 once ns nanoseconds have passed since the 64th look (the
 * clock is read every 64 looks, the first of them starting the count). */
struct spin {
    unsigned looks;
    double end;
};

static int spin_on(struct spin *s, double ns)
{
    if (++s->looks % 64 == 0) {
        double t = now_ns();
        if (s->end == 0)
            s->end = t + ns;
        else if (t > s->end)
            return 0;
    }
    cpu_relax();
    return 1;
}

/* Spins until *v != old or ns nanoseconds passed; returns whether it changed. */
static int spin_while_u64(atomic_uint_fast64_t *v, uint64_t old, double ns)
{
    struct spin s = {0, 0};
    while (atomic_load_explicit(v, memory_order_acquire) == old)
        if (!spin_on(&s, ns))
            return 0;
    return 1;
}

/* Spins until *v == want or ns nanoseconds passed; returns whether it came. */
static int spin_until_uint(atomic_uint *v, unsigned want, double ns)
{
    struct spin s = {0, 0};
    while (atomic_load_explicit(v, memory_order_acquire) != want)
        if (!spin_on(&s, ns))
            return 0;
    return 1;
}

static void *pool_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&pool.lock);
    uint64_t seen = pool.born; /* the call that started it may be out already */
    for (;;) {
        uint64_t g = atomic_load_explicit(&pool.gen, memory_order_relaxed);
        if (g != seen) { /* a call: its worker ids are claimed here, one per worker */
            seen = g;
            struct par *p = pool.job;
            if (p == NULL || p->claimed >= p->threads)
                continue; /* the call is over, or has all the workers it wants */
            unsigned id = p->claimed++;
            pthread_mutex_unlock(&pool.lock);
            run_worker(p, id);
            pthread_mutex_lock(&pool.lock);
            /* the caller takes the lock before it returns: p is alive here */
            unsigned done = atomic_fetch_add_explicit(&p->done, 1, memory_order_release) + 1;
            if (done == p->threads - 1 && pool.caller_waits)
                pthread_cond_signal(&pool.idle);
            continue;
        }
        if (pool.stop)
            break;
        pthread_mutex_unlock(&pool.lock);
        int moved = spin_while_u64(&pool.gen, seen, IDLE_SPIN_NS);
        pthread_mutex_lock(&pool.lock);
        if (moved || pool.stop ||
            atomic_load_explicit(&pool.gen, memory_order_relaxed) != seen)
            continue;
        pool.sleeping++;
        pthread_cond_wait(&pool.wake, &pool.lock);
        pool.sleeping--;
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

/* fork: the prepare handler holds the lock across fork(), so the child's copy
 * of the pool is consistent; only the forking thread exists in the child (no
 * worker, no call in progress), so the child empties its pool. */
static void pool_child(void)
{
    atomic_store(&pool.busy, 0);
    pool.workers = 0;
    pool.job = NULL;
    pool.sleeping = 0;
    pool.caller_waits = 0;
    pool.stop = 0;
    /* the parent's waiters are not in the child */
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.idle, NULL);
    pthread_mutex_unlock(&pool.lock);
}

static void pool_prepare(void) { pthread_mutex_lock(&pool.lock); }
static void pool_parent(void) { pthread_mutex_unlock(&pool.lock); }

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static int pool_ok;
static void pool_init(void)
{
    pool_ok = pthread_atfork(pool_prepare, pool_parent, pool_child) == 0;
}

/* The owner: starts workers until there are `want`; returns how many exist. */
static unsigned pool_grow(unsigned want)
{
    if (pool.workers >= want) /* only the owner writes it */
        return pool.workers;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_mutex_lock(&pool.lock);
    pool.born = atomic_load_explicit(&pool.gen, memory_order_relaxed);
    while (pool.workers < want && !pool.stop &&
           pthread_create(&pool.tid[pool.workers], NULL, pool_main, NULL) == 0)
        pool.workers++;
    unsigned n = pool.workers;
    pthread_mutex_unlock(&pool.lock);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return n;
}

/* Runs the call on the pool; returns 0 when the pool was not available (the
 * call is not started then). */
static int pool_run(struct par *p)
{
    if (pthread_once(&pool_once, pool_init) != 0 || !pool_ok)
        return 0;
    int zero = 0;
    if (!atomic_compare_exchange_strong(&pool.busy, &zero, 1))
        return 0;
    unsigned n = pool_grow(p->threads - 1);
    if (n == 0) {
        atomic_store(&pool.busy, 0);
        return 0;
    }
    if (p->threads - 1 > n)
        p->threads = n + 1;
    p->claimed = 1;
    atomic_init(&p->done, 0);
    pthread_mutex_lock(&pool.lock);
    if (pool.stop) {
        pthread_mutex_unlock(&pool.lock);
        atomic_store(&pool.busy, 0);
        return 0;
    }
    pool.job = p;
    atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
    if (pool.sleeping)
        pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);

    run_worker(p, 0);

    const unsigned need = p->threads - 1;
    int all = spin_until_uint(&p->done, need, DONE_SPIN_NS);
    pthread_mutex_lock(&pool.lock);
    if (!all) {
        pool.caller_waits = 1;
        while (atomic_load_explicit(&p->done, memory_order_acquire) != need)
            pthread_cond_wait(&pool.idle, &pool.lock);
        pool.caller_waits = 0;
    }
    pool.job = NULL; /* a worker that wakes late finds no call */
    pthread_mutex_unlock(&pool.lock);
    atomic_store(&pool.busy, 0);
    return 1;
}

__attribute__((destructor)) static void pool_stop(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.stop = 1;
    pthread_cond_broadcast(&pool.wake);
    unsigned n = pool.workers;
    pthread_mutex_unlock(&pool.lock);
    /* workers finish a call in progress first; a worker that is itself
     * exiting the process (a sink called exit) is not waited for */
    for (unsigned i = 0; i < n; i++)
        if (!pthread_equal(pool.tid[i], pthread_self()))
            pthread_join(pool.tid[i], NULL);
}

int l3_parallel_tiles(uint64_t tiles, unsigned threads, l3_tile_fn fn, void *arg)
{
    threads = l3_thread_count(threads, tiles);
    if (threads == 1) {
        for (uint64_t t = 0; t < tiles; t++) {
            int st = fn(arg, 0, t);
            if (st)
                return st;
        }
        return L3_OK;
    }
    struct par p;
    p.tiles = tiles;
    atomic_init(&p.next, 0);
    atomic_init(&p.status, 0);
    p.fn = fn;
    p.arg = arg;
    p.threads = threads;
    if (!pool_run(&p))
        run_own_threads(&p);
    return atomic_load(&p.status);
}
