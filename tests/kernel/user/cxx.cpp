/*
 * A C++ program the kernel cases trace by demangled names:
 *
 *   cxx N    N calls of shop::Cart::add(i) (a method defined outside its class, so its
 *            DWARF is a definition pointing to the declaration), then one of
 *            shop::Cart::total() and of each overload of shop::price.
 */
#include <cstdio>
#include <cstdlib>

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
} // namespace shop

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0;
	shop::Cart cart = { 0, 0 };
	for (long i = 0; i < n; i++)
		cart.add(i);
	long all = cart.total() + shop::price(5) + shop::price(1, 2);
	printf("%ld\n", all);
	return 0;
}
