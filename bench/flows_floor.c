/*
 * flows_floor: the cheapest sender of group flows' traffic, to show what the kernel charges
 * for a datagram on this path whatever the sender does (docs/benchmarks.md § e).
 *
 *   flows_floor recv BIND_IP FIRST_PORT FLOWS SECONDS
 *   flows_floor send DEST_IP FIRST_PORT FLOWS SECONDS PPS SIZE BATCH
 *   flows_floor frames DEV DEST_MAC SRC_IP DEST_IP FIRST_PORT FLOWS SECONDS PPS SIZE BATCH
 *
 * send: one unconnected socket; every BATCH/PPS seconds one sendmmsg() of BATCH datagrams of
 *       SIZE bytes, datagram k to port FIRST_PORT + k % FLOWS (flows take turns, as in the
 *       1000-flow test), then a clock_nanosleep(TIMER_ABSTIME) to the next batch. No clock
 *       reads per datagram, no headers: the send path alone.
 * frames: the same datagrams as whole Ethernet frames through a packet socket on DEV
 *       (AF_PACKET, as flowlab's --packet-socket), each flow's frame built once (IPv4 header
 *       checksum set, UDP checksum 0), from SRC_IP port 40000 to DEST_MAC; needs CAP_NET_RAW.
 * recv: FLOWS sockets on FIRST_PORT.., drained through epoll with recvmmsg().
 *
 * Both print one line of key=value pairs at the end; the sender's cpu_ns is its own user +
 * system time (getrusage), which on a kernel without IRQ_TIME_ACCOUNTING includes the softirq
 * work that runs on its core (on a veth, the receiving host's UDP stack unless RPS moves it).
 * The receiver stops SECONDS + 5 s after it started, or 1 s after the last arrival.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH 1024 /* UIO_MAXIOV */
#define MAX_FLOWS 4096
#define RX_BATCH 64
#define RX_BUF 2048

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static struct sockaddr_in addr_of(const char *ip, int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "bad IPv4 address: %s\n", ip);
        exit(2);
    }
    return a;
}

/* Where the sender's datagrams go: a UDP socket with an address per flow, or a packet
 * socket with a whole frame per flow. */
struct target {
    int fd;
    void *name[MAX_FLOWS];
    socklen_t namelen;
    struct iovec iov[MAX_FLOWS];
};

static struct sockaddr_in dst[MAX_FLOWS];
static char payload[1472];

static void udp_target(struct target *t, const char *ip, int first_port, int flows, int size)
{
    t->fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (t->fd < 0) die("socket");
    int sndbuf = 4 << 20;
    setsockopt(t->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
    memset(payload, 0x5a, sizeof payload);
    t->namelen = sizeof dst[0];
    for (int f = 0; f < flows; f++) {
        dst[f] = addr_of(ip, first_port + f);
        t->name[f] = &dst[f];
        t->iov[f] = (struct iovec){payload, (size_t)size};
    }
}

static uint16_t ip_checksum(const uint8_t *h)
{
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += (uint32_t)(h[i] << 8 | h[i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static void frame_target(struct target *t, const char *dev, const char *mac, const char *src,
                         const char *ip, int first_port, int flows, int size)
{
    static struct sockaddr_ll ll;
    static uint8_t frames[MAX_FLOWS][14 + 28 + 1472];
    unsigned m[6];
    struct sockaddr_in s = addr_of(src, 40000), d = addr_of(ip, 0);
    if (sscanf(mac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6) {
        fprintf(stderr, "bad MAC address: %s\n", mac);
        exit(2);
    }
    t->fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (t->fd < 0) die("socket(AF_PACKET)");
    ll.sll_family = AF_PACKET;
    ll.sll_ifindex = (int)if_nametoindex(dev);
    ll.sll_halen = 6;
    for (int i = 0; i < 6; i++) ll.sll_addr[i] = (uint8_t)m[i];
    if (ll.sll_ifindex == 0) die("if_nametoindex");
    for (int f = 0; f < flows; f++) {
        uint8_t *e = frames[f], *h = e + 14, *u = h + 20;
        memcpy(e, ll.sll_addr, 6);
        e[12] = 0x08;
        uint16_t ip_len = (uint16_t)(28 + size), udp_len = (uint16_t)(8 + size);
        uint16_t sport = htons(40000), dport = htons((uint16_t)(first_port + f));
        h[0] = 0x45, h[2] = (uint8_t)(ip_len >> 8), h[3] = (uint8_t)ip_len;
        h[6] = 0x40, h[8] = 64, h[9] = 17;
        memcpy(h + 12, &s.sin_addr, 4);
        memcpy(h + 16, &d.sin_addr, 4);
        uint16_t c = ip_checksum(h);
        h[10] = (uint8_t)(c >> 8), h[11] = (uint8_t)c;
        memcpy(u, &sport, 2);
        memcpy(u + 2, &dport, 2);
        u[4] = (uint8_t)(udp_len >> 8), u[5] = (uint8_t)udp_len;
        memset(u + 8, 0x5a, (size_t)size);
        t->name[f] = &ll;
        t->iov[f] = (struct iovec){frames[f], (size_t)(14 + ip_len)};
    }
    t->namelen = sizeof ll;
}

static int do_send(struct target *t, int flows, double seconds, double pps, int size, int batch)
{
    static struct mmsghdr mm[MAX_BATCH];
    uint64_t interval = (uint64_t)(1e9 * batch / pps);
    uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9), next = t0;
    uint64_t cpu0 = cpu_ns(), sent = 0, calls = 0, errors = 0, flow = 0;
    int first_errno = 0;
    while (next < end) {
        for (int i = 0; i < batch; i++) {
            mm[i].msg_hdr.msg_name = t->name[flow];
            mm[i].msg_hdr.msg_namelen = t->namelen;
            mm[i].msg_hdr.msg_iov = &t->iov[flow];
            mm[i].msg_hdr.msg_iovlen = 1;
            flow = (flow + 1) % (uint64_t)flows;
        }
        for (int done = 0; done < batch;) {
            calls++;
            int n = sendmmsg(t->fd, mm + done, (unsigned)(batch - done), MSG_DONTWAIT);
            if (n <= 0) {
                if (!errors) first_errno = errno;
                errors++;
                break;
            }
            done += n;
            sent += (uint64_t)n;
        }
        next += interval;
        struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
    }
    uint64_t cpu = cpu_ns() - cpu0;
    double el = (now_ns() - t0) / 1e9;
    printf("role=send flows=%d size=%d batch=%d sent=%llu calls=%llu errors=%llu "
           "first_errno=%d seconds=%.6f pps=%.1f cpu_ns=%llu cpu_pct=%.2f "
           "cpu_per_packet_ns=%.0f\n",
           flows, size, batch, (unsigned long long)sent, (unsigned long long)calls,
           (unsigned long long)errors, first_errno, el, sent / el, (unsigned long long)cpu,
           100.0 * cpu / 1e9 / el, sent ? (double)cpu / sent : 0.0);
    if (first_errno) fprintf(stderr, "first send error: %s\n", strerror(first_errno));
    return 0;
}

static int bad_send_args(int first_port, int flows, double pps, int size, int batch)
{
    if (flows < 1 || flows > MAX_FLOWS || pps <= 0 || size < 8 || size > 1472 || batch < 1 ||
        batch > MAX_BATCH || first_port < 1 || first_port + flows > 65536) {
        fprintf(stderr, "bad flows, rate, size or batch\n");
        return 1;
    }
    return 0;
}

static int do_recv(const char *ip, int first_port, int flows, double seconds)
{
    if (flows < 1 || flows > MAX_FLOWS || first_port < 1 || first_port + flows > 65536) {
        fprintf(stderr, "bad port or flows\n");
        return 2;
    }
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    for (int f = 0; f < flows; f++) {
        struct sockaddr_in me = addr_of(ip, first_port + f);
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        if (fd < 0) die("socket");
        if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0) die("bind");
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
    }
    printf("role=recv ready=1 flows=%d\n", flows);
    fflush(stdout);

    static char bufs[RX_BATCH][RX_BUF];
    static struct mmsghdr mm[RX_BATCH];
    static struct iovec iov[RX_BATCH];
    for (int i = 0; i < RX_BATCH; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = RX_BUF;
        mm[i].msg_hdr.msg_iov = &iov[i];
        mm[i].msg_hdr.msg_iovlen = 1;
    }
    struct epoll_event ready[256];
    uint64_t received = 0, t0 = now_ns(), first = 0, last = 0, cpu0 = cpu_ns();
    uint64_t hard_end = t0 + (uint64_t)((seconds + 5.0) * 1e9);
    for (;;) {
        int k = epoll_wait(ep, ready, 256, 200);
        if (k < 0 && errno != EINTR) die("epoll_wait");
        for (int e = 0; e < k; e++) {
            int n;
            while ((n = recvmmsg(ready[e].data.fd, mm, RX_BATCH, MSG_DONTWAIT, NULL)) > 0)
                received += (uint64_t)n;
        }
        uint64_t t = now_ns();
        if (k > 0) {
            if (first == 0) first = t;
            last = t;
        }
        if (t > hard_end) break;
        if (first != 0 && t - last > 1000000000ull) break;
    }
    double span = last > first ? (last - first) / 1e9 : 0;
    printf("role=recv received=%llu seconds=%.6f pps=%.1f cpu_ns=%llu\n",
           (unsigned long long)received, span, span > 0 ? received / span : 0.0,
           (unsigned long long)(cpu_ns() - cpu0));
    return 0;
}

int main(int argc, char **argv)
{
    static struct target t;
    if (argc == 6 && strcmp(argv[1], "recv") == 0)
        return do_recv(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]));
    if (argc == 9 && strcmp(argv[1], "send") == 0) {
        int port = atoi(argv[3]), flows = atoi(argv[4]), size = atoi(argv[7]);
        if (bad_send_args(port, flows, atof(argv[6]), size, atoi(argv[8]))) return 2;
        udp_target(&t, argv[2], port, flows, size);
        return do_send(&t, flows, atof(argv[5]), atof(argv[6]), size, atoi(argv[8]));
    }
    if (argc == 12 && strcmp(argv[1], "frames") == 0) {
        int port = atoi(argv[6]), flows = atoi(argv[7]), size = atoi(argv[10]);
        if (bad_send_args(port, flows, atof(argv[9]), size, atoi(argv[11]))) return 2;
        frame_target(&t, argv[2], argv[3], argv[4], argv[5], port, flows, size);
        return do_send(&t, flows, atof(argv[8]), atof(argv[9]), size, atoi(argv[11]));
    }
    fprintf(stderr,
            "usage: flows_floor recv BIND_IP FIRST_PORT FLOWS SECONDS\n"
            "       flows_floor send DEST_IP FIRST_PORT FLOWS SECONDS PPS SIZE BATCH\n"
            "       flows_floor frames DEV DEST_MAC SRC_IP DEST_IP FIRST_PORT FLOWS SECONDS PPS "
            "SIZE BATCH\n");
    return 2;
}
