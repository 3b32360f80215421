/*
 * gso_flood: the machine's limit for small UDP datagrams, as a bare C loop.
 *
 *   gso_flood recv BIND_IP PORT SECONDS
 *   gso_flood send DEST_IP PORT SECONDS gso|mmsg [SEG_SIZE] [SEGS]
 *
 * send gso : one sendmsg() per SEGS (64) datagrams of SEG_SIZE (64) bytes, handed to the
 *            kernel as a single UDP GSO super-datagram (cmsg UDP_SEGMENT).
 * send mmsg: one sendmmsg() per SEGS separate datagrams (no GSO), for context.
 * recv     : recvmmsg() of up to 64 messages per call with UDP_GRO enabled, so a GSO
 *            super-datagram arrives whole and is counted as len/gso_size datagrams.
 *
 * Each 64-byte datagram carries its 64-bit sequence number in its first 8 bytes. Both ends
 * print one line of key=value pairs at the end, e.g.
 *   role=send mode=gso sent=123 calls=4 errors=0 first_errno=0 seconds=10.000 pps=...
 *   role=recv received=120 max_seq=122 seconds=9.999 pps=... rxq_ovfl=3
 * The benchmark combines them: loss = 1 - received / sent.
 *
 * The receiver stops SECONDS + 5 s after it started, or 1 s after the last arrival once
 * something arrived, whichever comes first. The sender stops after SECONDS.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SO_RXQ_OVFL
#define SO_RXQ_OVFL 40
#endif

#define MAX_SEGS 64
#define RX_BATCH 64
#define RX_BUF 65536

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "bad IPv4 address: %s\n", ip);
        exit(2);
    }
    return a;
}

static int do_send(const char *ip, const char *port, double seconds, const char *mode,
                   int seg, int segs)
{
    int gso = strcmp(mode, "gso") == 0;
    if (!gso && strcmp(mode, "mmsg") != 0) {
        fprintf(stderr, "mode must be gso or mmsg\n");
        return 2;
    }
    if (seg < 8 || seg > 1472 || segs < 1 || segs > MAX_SEGS) {
        fprintf(stderr, "bad segment size or count\n");
        return 2;
    }
    struct sockaddr_in dst = addr_of(ip, port);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) die("socket");
    int sndbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
    if (connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0) die("connect");

    static char buf[MAX_SEGS * 1472];
    memset(buf, 0x5a, sizeof buf);
    uint64_t seq = 0, sent = 0, calls = 0, errors = 0;
    int first_errno = 0;

    /* GSO: one iovec with segs*seg bytes and a UDP_SEGMENT cmsg. */
    struct iovec iov = {buf, (size_t)seg * segs};
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctrl;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.buf;
    msg.msg_controllen = sizeof ctrl.buf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t gso_size = (uint16_t)seg;
    memcpy(CMSG_DATA(cm), &gso_size, sizeof gso_size);

    /* mmsg: segs separate messages. */
    struct mmsghdr mm[MAX_SEGS];
    struct iovec iovs[MAX_SEGS];
    memset(mm, 0, sizeof mm);
    for (int i = 0; i < segs; i++) {
        iovs[i].iov_base = buf + (size_t)i * seg;
        iovs[i].iov_len = (size_t)seg;
        mm[i].msg_hdr.msg_iov = &iovs[i];
        mm[i].msg_hdr.msg_iovlen = 1;
    }

    double t0 = now_s(), end = t0 + seconds, t = t0;
    while (t < end) {
        for (int i = 0; i < segs; i++) {
            uint64_t s = seq + (uint64_t)i;
            memcpy(buf + (size_t)i * seg, &s, sizeof s);
        }
        calls++;
        if (gso) {
            ssize_t n = sendmsg(fd, &msg, 0);
            if (n < 0) {
                if (errno == EIO && calls == 1) {
                    fprintf(stderr, "sendmsg with UDP_SEGMENT: %s (no GSO here?)\n",
                            strerror(errno));
                    return 1;
                }
                if (!errors) first_errno = errno;
                errors++;
            } else {
                sent += (uint64_t)segs;
                seq += (uint64_t)segs;
            }
        } else {
            int n = sendmmsg(fd, mm, (unsigned)segs, 0);
            if (n < 0) {
                if (!errors) first_errno = errno;
                errors++;
            } else {
                sent += (uint64_t)n;
                seq += (uint64_t)n;
            }
        }
        /* Read the clock every 16 calls: cheap enough, and at most ~1000 datagrams late. */
        if ((calls & 15) == 0) t = now_s();
    }
    double el = now_s() - t0;
    printf("role=send mode=%s seg=%d segs=%d sent=%llu calls=%llu errors=%llu first_errno=%d "
           "seconds=%.6f pps=%.1f\n",
           mode, seg, segs, (unsigned long long)sent, (unsigned long long)calls,
           (unsigned long long)errors, first_errno, el, sent / el);
    if (first_errno) fprintf(stderr, "first send error: %s\n", strerror(first_errno));
    return 0;
}

static int do_recv(const char *ip, const char *port, double seconds)
{
    struct sockaddr_in me = addr_of(ip, port);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rcvbuf = 8 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    int gro_ok = setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
    setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
    struct timeval tv = {0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0) die("bind");
    printf("role=recv ready=1 gro=%d\n", gro_ok);
    fflush(stdout);

    static char bufs[RX_BATCH][RX_BUF];
    static char ctrls[RX_BATCH][256];
    struct mmsghdr mm[RX_BATCH];
    struct iovec iov[RX_BATCH];

    uint64_t received = 0, datagrams = 0, bytes = 0, max_seq = 0, calls = 0;
    uint32_t ovfl = 0;
    double t0 = now_s(), first = 0, last = 0;
    double hard_end = t0 + seconds + 5.0;
    for (;;) {
        for (int i = 0; i < RX_BATCH; i++) {
            iov[i].iov_base = bufs[i];
            iov[i].iov_len = RX_BUF;
            memset(&mm[i].msg_hdr, 0, sizeof mm[i].msg_hdr);
            mm[i].msg_hdr.msg_iov = &iov[i];
            mm[i].msg_hdr.msg_iovlen = 1;
            mm[i].msg_hdr.msg_control = ctrls[i];
            mm[i].msg_hdr.msg_controllen = sizeof ctrls[i];
        }
        int n = recvmmsg(fd, mm, RX_BATCH, MSG_WAITFORONE, NULL);
        double t = now_s();
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) die("recvmmsg");
            n = 0;
        }
        calls++;
        for (int i = 0; i < n; i++) {
            size_t len = mm[i].msg_len;
            size_t gs = len;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&mm[i].msg_hdr); c;
                 c = CMSG_NXTHDR(&mm[i].msg_hdr, c)) {
                if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                    int v;
                    memcpy(&v, CMSG_DATA(c), sizeof v);
                    if (v > 0) gs = (size_t)v;
                } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
                    memcpy(&ovfl, CMSG_DATA(c), sizeof ovfl);
                }
            }
            if (gs == 0) gs = 1;
            size_t segs = (len + gs - 1) / gs;
            received += segs;
            datagrams++;
            bytes += len;
            /* The last segment's sequence number is the highest of the super-datagram. */
            if (len >= 8) {
                uint64_t s;
                memcpy(&s, bufs[i] + (segs - 1) * gs, sizeof s);
                if (s > max_seq) max_seq = s;
            }
        }
        if (n > 0) {
            if (first == 0) first = t;
            last = t;
        }
        if (t > hard_end) break;
        if (first != 0 && t - last > 1.0) break;
    }
    double span = last > first ? last - first : 0;
    printf("role=recv received=%llu datagrams=%llu bytes=%llu max_seq=%llu calls=%llu "
           "seconds=%.6f pps=%.1f rxq_ovfl=%u gro=%d\n",
           (unsigned long long)received, (unsigned long long)datagrams,
           (unsigned long long)bytes, (unsigned long long)max_seq,
           (unsigned long long)calls, span, span > 0 ? received / span : 0.0, ovfl, gro_ok);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "recv") == 0)
        return do_recv(argv[2], argv[3], atof(argv[4]));
    if (argc >= 6 && strcmp(argv[1], "send") == 0)
        return do_send(argv[2], argv[3], atof(argv[4]), argv[5],
                       argc > 6 ? atoi(argv[6]) : 64, argc > 7 ? atoi(argv[7]) : 64);
    fprintf(stderr,
            "usage: gso_flood recv BIND_IP PORT SECONDS\n"
            "       gso_flood send DEST_IP PORT SECONDS gso|mmsg [SEG_SIZE] [SEGS]\n");
    return 2;
}
