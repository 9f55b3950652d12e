// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

async fn upload(
    plan: &Plan,
    account: &Account,
    caller: &Caller,
    items: &[Item],
) -> Result<(), AppError> {
    {
        fn __ratelimit() {}
        ::ratelimit_runtime::__private::inventory::submit! {
            ::ratelimit_runtime::__private::Declaration { name :
            ::core::option::Option::None, function : { fn __ratelimit_scope() -> &
            'static ::core::primitive::str {
            ::ratelimit_runtime::__private::scope_from_item_path(::ratelimit_runtime::__private::type_name_of(&
            __ratelimit),) } __ratelimit_scope }, position :
            ::core::option::Option::None, rate : ::core::option::Option::None, cost :
            ::core::option::Option::None, file : ::core::file!(), line : ::core::line!(),
            }
        }
        let __ratelimit: &'static ::core::primitive::str = {
            static __RATELIMIT_SCOPE: ::ratelimit_runtime::__private::Scope = ::ratelimit_runtime::__private::Scope::new();
            __RATELIMIT_SCOPE.of(&__ratelimit)
        };
        let mut __ratelimit = ::ratelimit_runtime::__private::Stack::new(
            __ratelimit,
            ::ratelimit_runtime::__private::Layout::One,
            1,
        );
        if !{
            let __ratelimit: ::core::primitive::bool = caller.is_internal();
            __ratelimit
        } {
            __ratelimit
                .keyed(
                    ::ratelimit_runtime::__private::LimitSpec {
                        name: ::core::option::Option::None,
                        position: ::core::option::Option::None,
                        rate: plan.rate(),
                        rate_chosen_per_call: true,
                        cost: ::ratelimit_runtime::__private::cost(items.len()),
                        label: ::core::option::Option::None,
                        shadow: false,
                        index: 0,
                    },
                    &(account.id),
                );
        }
        if let ::core::result::Result::Err(__ratelimit) = ::ratelimit_runtime::__private::check_stack(
                ::ratelimit_runtime::__private::global(),
                __ratelimit,
            )
            .await
        {
            return ::ratelimit_runtime::__private::denied(__ratelimit);
        }
    }
    { Ok(()) }
}
