"""Addresses on both sides of the line DESIGN §7 draws: one or more from every non-global
IPv4 and IPv6 range (IPv4-mapped, IPv4-compatible, 6to4, NAT64 and Teredo forms included),
and global ones just outside those ranges. Shared by the unit tests of the rules and the
functional tests of the client that applies them.
"""

from __future__ import annotations

NON_GLOBAL_V4 = [
    "0.0.0.0",  # "this network" 0/8, both ends
    "0.255.255.255",
    "10.0.0.0",  # private 10/8
    "10.255.255.255",
    "100.64.0.0",  # carrier-grade NAT 100.64/10
    "100.127.255.255",
    "127.0.0.1",  # loopback 127/8
    "127.255.255.255",
    "169.254.0.1",  # link-local 169.254/16
    "169.254.169.254",  # cloud metadata
    "172.16.0.0",  # private 172.16/12
    "172.31.255.255",
    "192.0.0.0",  # IETF protocol assignments 192.0.0/24
    "192.0.0.9",
    "192.0.0.255",
    "192.0.2.1",  # documentation TEST-NET-1
    "192.88.99.1",  # deprecated 6to4 relay anycast
    "192.168.0.0",  # private 192.168/16
    "192.168.255.255",
    "198.18.0.0",  # benchmarking 198.18/15
    "198.19.255.255",
    "198.51.100.1",  # documentation TEST-NET-2
    "203.0.113.1",  # documentation TEST-NET-3
    "224.0.0.1",  # multicast 224/4
    "233.252.0.1",  # multicast documentation
    "239.255.255.255",
    "240.0.0.1",  # reserved 240/4
    "255.255.255.254",
    "255.255.255.255",  # broadcast
]

GLOBAL_V4 = [
    "8.8.8.8",
    "1.1.1.1",
    "1.0.0.0",
    "9.255.255.255",  # just outside 10/8
    "11.0.0.0",
    "100.63.255.255",  # just outside 100.64/10
    "100.128.0.0",
    "126.255.255.255",  # just outside 127/8
    "128.0.0.0",
    "169.253.255.255",  # just outside 169.254/16
    "169.255.0.0",
    "172.15.255.255",  # just outside 172.16/12
    "172.32.0.0",
    "192.0.1.1",
    "192.167.255.255",  # just outside 192.168/16
    "192.169.0.0",
    "198.17.255.255",  # just outside 198.18/15
    "198.20.0.0",
    "223.255.255.255",  # just below multicast
]

TEREDO_CLIENT_LOOPBACK = "2001:0:4136:e378:8000:63bf:80ff:fffe"  # client 127.0.0.1, XORed
TEREDO_SERVER_PRIVATE = "2001:0:a00:1:8000:63bf:f7f7:f7f7"  # server 10.0.0.1, client 8.8.8.8
TEREDO_ALL_GLOBAL = "2001:0:808:808:8000:63bf:f7f7:f7f7"  # server and client 8.8.8.8

NON_GLOBAL_V6 = [
    "::",  # unspecified
    "::1",  # loopback
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::127.0.0.1",  # IPv4-compatible (deprecated)
    "::8.8.8.8",  # deprecated, not routed, whatever it carries
    "64:ff9b::7f00:1",  # NAT64 well-known prefix carrying 127.0.0.1
    "64:ff9b::a00:1",  # … carrying 10.0.0.1
    "64:ff9b::a9fe:a9fe",  # … carrying 169.254.169.254
    "64:ff9b:1::a00:1",  # NAT64 local-use prefix
    "64:ff9b:1::808:808",
    "100::",  # discard 100::/64
    "100::ffff:ffff:ffff:ffff",
    "2001::1",  # IETF protocol assignments 2001::/23
    "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
    TEREDO_CLIENT_LOOPBACK,
    TEREDO_SERVER_PRIVATE,
    TEREDO_ALL_GLOBAL,
    "2001:10::1",  # ORCHID
    "2001:db8::1",  # documentation 2001:db8::/32
    "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
    "2002:7f00:1::",  # 6to4 carrying 127.0.0.1
    "2002:a00:1::1",  # … carrying 10.0.0.1
    "2002:a9fe:a9fe::",  # … carrying 169.254.169.254
    "2002:c0a8:101::",  # … carrying 192.168.1.1
    "3fff::1",  # documentation 3fff::/20
    "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
    "fc00::1",  # unique-local fc00::/7
    "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    "fe80::1",  # link-local fe80::/10
    "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    "fec0::1",  # site-local fec0::/10 (deprecated)
    "feff::1",
    "ff02::1",  # multicast
    "ff0e::1",
    "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",  # below 2000::/3
    "4000::1",  # above 2000::/3
    "5f00::1",  # SRv6 SIDs
    "e000::1",
]

GLOBAL_V6 = [
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2000::1",  # first of 2000::/3
    "2001:200::1",  # just outside 2001::/23
    "2001:db9::1",  # just outside 2001:db8::/32
    "3fff:1000::1",  # just outside 3fff::/20
    "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",  # last of 2000::/3
    "::ffff:8.8.8.8",  # IPv4-mapped public address
    "2002:808:808::1",  # 6to4 carrying 8.8.8.8
    "64:ff9b::808:808",  # NAT64 carrying 8.8.8.8
]
