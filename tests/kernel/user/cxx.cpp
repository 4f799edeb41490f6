/*
 * A C++ program the kernel cases trace by demangled names:
 *
 *   cxx N    N calls of shop::Cart::add(i) (a method defined outside its class, so its
 *            DWARF is a definition pointing to the declaration), then one of
 *            shop::Cart::total() and of each overload of shop::price.
 *   cxx read shop::stock() reads 10000 bytes of its own file with std::ifstream::read,
 *            a request over the stream's buffer, so libstdc++ makes it one read(2) through
 *            std::basic_filebuf::xsgetn; it lingers a second after. Built -O2
 *            -fomit-frame-pointer too (cxx-nofp), for ustack through libstdc++'s frames.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

namespace shop {
struct Cart {
	long items;
	long sum;
	long add(long price);
	long total() const;
};

NOINLINE long Cart::add(long price)
{
	items++;
	sum += price;
	return sum;
}

NOINLINE long Cart::total() const
{
	return sum;
}

NOINLINE long price(long cents)
{
	return cents;
}

NOINLINE long price(int euros, int cents)
{
	return euros * 100L + cents;
}

NOINLINE long stock(const char *path)
{
	static char buf[10000];
	std::ifstream in(path, std::ios::binary);
	in.read(buf, sizeof buf);
	long n = in.gcount();
	__asm__ volatile("" : "+r"(n));
	return n;
}
} // namespace shop

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "read") == 0) {
		long n = shop::stock("/proc/self/exe");
		sleep(1);
		return n == 10000 ? 0 : 1;
	}
	long n = argc > 1 ? atol(argv[1]) : 0;
	shop::Cart cart = { 0, 0 };
	for (long i = 0; i < n; i++)
		cart.add(i);
	long all = cart.total() + shop::price(5) + shop::price(1, 2);
	printf("%ld\n", all);
	return 0;
}
