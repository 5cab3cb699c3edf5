/* test_pool.c — the persistent worker threads of multi-threaded decode and
 * encode (codec/pool.c): several application threads decoding at once, a
 * decode inside a decode's sink (the pool is taken: threads of its own), a
 * forked child decoding after its parent used the pool, and a failure on a
 * worker thread reaching the caller. Every decode is compared sample by
 * sample with the one-thread decode. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "l3.h"

/* An encoded 8-bit RGB image of w x h (32x32 tiles: many batches) and its
 * pixels. */
struct img {
    void *l3;
    size_t n;
    void *px;
    size_t pxn;
};

static void make_img(struct img *m, uint32_t w, uint32_t h, enum th_pattern pat, uint64_t seed)
{
    struct l3_info info;
    th_info(&info, L3_COLOR_RGB, 8, w, h);
    m->px = th_image(&info, pat, seed, &m->pxn);
    cr_assert_not_null(m->px);
    cr_assert_eq(th_encode(&info, m->px, 32, 1, &m->l3, &m->n), L3_OK);
}

static void free_img(struct img *m)
{
    free(m->l3);
    free(m->px);
}

/* l3_decode with `threads` threads; 0 when it gave the source pixels. */
static int decode_matches(const struct img *m, unsigned threads)
{
    void *out = malloc(m->pxn);
    if (out == NULL)
        return -1;
    struct l3_decode_options o;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    int st = l3_decode(m->l3, m->n, out, m->pxn, 0, &o);
    int bad = st != L3_OK ? st : memcmp(out, m->px, m->pxn) != 0;
    free(out);
    return bad;
}

struct racer {
    const struct img *imgs;
    unsigned nimg, id, rounds;
    int bad; /* decodes that failed or differed */
};

static void *race(void *v)
{
    struct racer *r = v;
    for (unsigned k = 0; k < r->rounds; k++) {
        const struct img *m = &r->imgs[(r->id + k) % r->nimg];
        r->bad += decode_matches(m, 2 + (r->id + k) % 3) != 0;
    }
    return NULL;
}

Test(pool, concurrent_decodes_from_several_threads_are_exact)
{
    struct img imgs[3];
    make_img(&imgs[0], 300, 200, TH_NOISE, 1);
    make_img(&imgs[1], 257, 129, TH_MIXED, 2);
    make_img(&imgs[2], 96, 640, TH_GRADIENT, 3);
    enum { RACERS = 4 };
    pthread_t tid[RACERS];
    struct racer r[RACERS];
    for (unsigned i = 0; i < RACERS; i++) {
        r[i] = (struct racer){imgs, 3, i, 40, 0};
        cr_assert_eq(pthread_create(&tid[i], NULL, race, &r[i]), 0);
    }
    for (unsigned i = 0; i < RACERS; i++) {
        pthread_join(tid[i], NULL);
        cr_expect_eq(r[i].bad, 0, "racer %u: %d of %u decodes failed or differed", i, r[i].bad,
                     r[i].rounds);
    }
    /* and the pool still works from this thread afterwards */
    for (unsigned i = 0; i < 3; i++)
        cr_expect_eq(decode_matches(&imgs[i], 2), 0);
    for (unsigned i = 0; i < 3; i++)
        free_img(&imgs[i]);
}

/* A sink that decodes another image with two threads from inside a
 * two-thread decode: the pool belongs to the outer decode then. */
struct nest {
    const struct img *inner;
    atomic_int calls, bad;
};

static int nested_sink(void *arg, unsigned worker, const struct l3_tile_out *t)
{
    struct nest *n = arg;
    (void)worker;
    if (t->index % 7 == 0) {
        atomic_fetch_add(&n->calls, 1);
        if (decode_matches(n->inner, 2) != 0)
            atomic_fetch_add(&n->bad, 1);
    }
    return 0;
}

Test(pool, decode_inside_a_decode_uses_threads_of_its_own)
{
    struct img outer, inner;
    make_img(&outer, 320, 96, TH_NOISE, 4);
    make_img(&inner, 200, 120, TH_MIXED, 5);
    struct nest n = {.inner = &inner};
    struct l3_decode_options o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    cr_assert_eq(l3_decode_tiles(outer.l3, outer.n, &o, nested_sink, &n), L3_OK);
    cr_expect_gt(atomic_load(&n.calls), 0);
    cr_expect_eq(atomic_load(&n.bad), 0);
    cr_expect_eq(decode_matches(&outer, 2), 0);
    free_img(&outer);
    free_img(&inner);
}

Test(pool, forked_child_decodes_after_the_parent_used_the_pool)
{
    struct img m;
    make_img(&m, 300, 200, TH_NOISE, 6);
    cr_assert_eq(decode_matches(&m, 2), 0); /* the parent's workers start here */
    cr_assert_eq(decode_matches(&m, 4), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        alarm(20); /* a child waiting on workers that are not there dies of SIGALRM */
        int bad = 0;
        for (unsigned k = 0; k < 10; k++)
            bad |= decode_matches(&m, 2 + k % 3) != 0;
        _exit(bad ? 1 : 0);
    }
    int ws = 0;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_expect(WIFEXITED(ws), "the child did not exit (signal %d)",
              WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    cr_expect_eq(WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, 0, "the child's decodes differed");
    cr_expect_eq(decode_matches(&m, 2), 0); /* the parent's pool is intact */
    free_img(&m);
}

/* Fails on the first tile the second thread gets; the caller's thread waits
 * (up to 10 s) for that first, so that the failure is a worker's. */
struct fail_on_worker {
    atomic_int worker_seen;
    atomic_int late; /* the wait timed out */
};

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail_sink(void *arg, unsigned worker, const struct l3_tile_out *t)
{
    struct fail_on_worker *f = arg;
    (void)t;
    if (worker != 0) {
        atomic_store(&f->worker_seen, 1);
        return 1234;
    }
    double end = mono() + 10;
    while (!atomic_load(&f->worker_seen))
        if (mono() > end) {
            atomic_store(&f->late, 1);
            return 0;
        }
    return 0;
}

Test(pool, a_failure_on_a_worker_thread_is_the_decodes_status)
{
    struct img m;
    make_img(&m, 320, 320, TH_NOISE, 7);
    for (unsigned k = 0; k < 3; k++) { /* the first time starts the workers */
        struct fail_on_worker f = {0};
        struct l3_decode_options o;
        memset(&o, 0, sizeof o);
        o.threads = 2;
        cr_expect_eq(l3_decode_tiles(m.l3, m.n, &o, fail_sink, &f), 1234);
        cr_expect_eq(atomic_load(&f.late), 0, "the second thread never got a tile");
        cr_expect_eq(decode_matches(&m, 2), 0); /* the pool is not left stuck */
    }
    free_img(&m);
}
